"""The profiler-marker table (explorer.model.markers): each rule matches the event it was written for and
nothing real that looks like it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from explorer.model.markers import MARKER_RULES, is_marker, marker_mask

MARKERS = [
    ("slice", "Trace", "PyTorch Profiler (0)"),
    ("slice", "Trace", "__cupti_profiler__ (-1)"),
    ("slice", "trace", "MTIA Activity Trace (-1)"),
    ("instant", "i", "Iteration Start: PyTorch Profiler"),
    ("instant", "", "Record Window End"),
    ("instant", "i", "Record Window Start"),
]
REAL = [
    ("slice", "user_annotation", "PyTorch Profiler (0)"),  # a user's record_function of that name is real
    ("slice", "cpu_op", "Record Window End"),
    ("slice", "kernel", "Trace"),
    ("instant", "cpu_instant_event", "[memory]"),
    ("instant", "i", "Record Window End of mine"),
    ("instant", "Trace", "Iteration Start"),  # no ": "
]


@pytest.mark.parametrize(("kind", "cat", "name"), MARKERS)
def test_markers_match(kind: str, cat: str, name: str) -> None:
    assert is_marker(kind, cat, name)


@pytest.mark.parametrize(("kind", "cat", "name"), REAL)
def test_real_events_do_not(kind: str, cat: str, name: str) -> None:
    assert not is_marker(kind, cat, name)


def test_every_rule_has_a_source_and_an_example() -> None:
    for rule in MARKER_RULES:
        assert rule.source and rule.kind in ("slice", "instant")
        assert any(kind == rule.kind and (not rule.name or name == rule.name) and name.startswith(rule.prefix)
                   for kind, _cat, name in MARKERS), rule


def test_dictionary_columns_give_the_same_mask() -> None:
    cats = pa.array(["Trace", "kernel", "Trace", "cpu_op"])
    names = pa.array(["PyTorch Profiler (0)", "k", "x", "Record Window End"])
    plain = marker_mask("slice", cats, names)
    coded = marker_mask("slice", pa.chunked_array([cats.dictionary_encode()]), pa.chunked_array([names]))
    assert plain.tolist() == coded.tolist() == [True, False, True, False]


def test_slice_markers_are_on_lane_other() -> None:
    """explorer.analysis.breakdown looks for marker slices on lane `other` only."""
    from explorer.model.lanes import Lane, rule_for

    for rule in MARKER_RULES:
        if rule.kind == "slice":
            assert rule.category and rule_for(rule.category).lane == Lane.OTHER, rule

"""Chrome Trace Event Format and Kineto ingest on tiny named fixtures, through every parser path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome.feed import KINETO_ARG_NAMES, PHASE_RULES, Feeder
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.model.tables import IngestedTrace
from tests.helpers.parsers import WITH_PIECES, use_parser

Ingest = Callable[[Any], IngestedTrace]
BASE = 1_700_000_000_000_000_000


@pytest.fixture(params=WITH_PIECES)
def ingest(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ingest:
    """Ingest a document (object, list, or raw text) through the small-file path, the compiled reader or
    DuckDB's (the events array read whole, or cut wherever two events meet: tests/helpers/parsers.py)."""
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 1 << 40)
    use_parser(monkeypatch, request.param)
    monkeypatch.setattr(chrome_fast, "BATCH_ROWS", 3)  # flows and B/E pairs must meet across batches

    def run(doc: Any) -> IngestedTrace:
        path = tmp_path / "trace.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        inputs = collect_inputs([path], scratch_root=tmp_path)
        try:
            return ingest_inputs(inputs)
        finally:
            inputs.cleanup()

    return run


def rows(table: pa.Table, *columns: str) -> list[tuple[Any, ...]]:
    data = table.select(list(columns)).to_pylist()
    return [tuple(r[c] for c in columns) for r in data]


def by_name(trace: IngestedTrace) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in trace.tables["slices"].to_pylist()}


def warning_codes(trace: IngestedTrace) -> dict[str, int]:
    return {w.code: w.count for w in trace.warnings}


KINETO = {
    "baseTimeNanoseconds": BASE,
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 7, "tid": 7, "ts": 10.0, "dur": 20.0,
         "args": {"External id": 1, "Input Dims": [[4, 8], [8, 8]]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 7, "tid": 7, "ts": 11.0, "dur": 15.0,
         "args": {"External id": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 12.0, "dur": 4.0,
         "args": {"External id": 2, "correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 30.0, "dur": 5.5,
         "args": {"External id": 2, "correlation": 99, "stream": 7}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 7, "tid": 7, "ts": 12.0},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 0, "tid": 7, "ts": 30.0, "bp": "e"},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": 7, "ts": 13.0, "s": "t",
         "args": {"Total Allocated": 1024, "Total Reserved": 2048, "Bytes": 1024, "Device Type": 0}},
    ],
}


def test_kineto_three_lanes_linked_and_attributed(ingest: Ingest) -> None:
    trace = ingest(KINETO)
    s = by_name(trace)
    assert {n: r["lane"] for n, r in s.items()} == {
        "aten::linear": "framework", "aten::addmm": "framework", "cudaLaunchKernel": "runtime", "sgemm": "hardware"}
    # times: baseTimeNanoseconds + µs -> integer ns
    assert s["aten::linear"]["ts_ns"] == BASE + 10_000 and s["aten::linear"]["dur_ns"] == 20_000
    assert s["sgemm"]["dur_ns"] == 5_500
    assert s["aten::addmm"]["parent_id"] == s["aten::linear"]["slice_id"]
    assert s["cudaLaunchKernel"]["op_id"] == s["aten::addmm"]["slice_id"]
    assert s["sgemm"]["op_id"] == s["aten::addmm"]["slice_id"]
    flows = rows(trace.tables["flows"], "from_slice", "to_slice", "kind")
    assert (s["cudaLaunchKernel"]["slice_id"], s["sgemm"]["slice_id"], "execute") in flows
    assert len(flows) == 1  # the ac2g flow and the correlation id describe the same link once
    ops = {r["name"]: r for r in trace.tables["op_stats"].to_pylist()}
    assert ops["aten::linear"]["device_total_ns"] == 5_500 and ops["aten::linear"]["self_device_ns"] == 0
    assert ops["aten::addmm"]["self_device_ns"] == 5_500
    assert ops["aten::linear"]["self_cpu_ns"] == 5_000
    assert ops["aten::addmm"]["self_cpu_ns"] == 15_000 - 4_000  # runtime calls are children, as in torch
    assert s["aten::linear"]["shapes"] == "[[4, 8], [8, 8]]"  # as torch shows input shapes, on every path
    counters = {r["label"] for r in trace.tables["tracks"].to_pylist() if r["kind"] == "counter"}
    assert "memory allocated (CPU) [bytes]" in counters


def test_begin_end_pairs_out_of_order_and_unmatched(ingest: Ingest) -> None:
    trace = ingest([
        {"ph": "E", "name": "", "pid": 1, "tid": 1, "ts": 9},
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 20},
        {"ph": "B", "name": "never closed", "pid": 1, "tid": 1, "ts": 30},
    ])
    s = by_name(trace)
    assert (s["outer"]["dur_ns"], s["inner"]["dur_ns"]) == (4_000, 1_000)
    assert s["inner"]["parent_id"] == s["outer"]["slice_id"]
    assert warning_codes(trace) == {"unmatched_end": 2, "unclosed_begin": 1}
    assert rows(trace.tables["instants"], "name") == [("never closed",)]


def test_partial_overlap_goes_to_a_sub_row_not_dropped(ingest: Ingest) -> None:
    trace = ingest([
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
    ])
    s = by_name(trace)
    assert s["a"]["track_id"] != s["b"]["track_id"]
    labels = {r["track_id"]: r["label"] for r in trace.tables["tracks"].to_pylist()}
    assert "overlap" in labels[s["b"]["track_id"]]
    assert warning_codes(trace) == {"overlap": 1}


@pytest.mark.parametrize("text", [
    '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}',
    '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},\n',
    '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]',
], ids=["no_bracket", "trailing_comma", "closed"])
def test_array_form_may_omit_closing_bracket(ingest: Ingest, text: str) -> None:
    assert by_name(ingest(text))["a"]["dur_ns"] == 2_000


def test_display_time_unit_does_not_change_timestamps(ingest: Ingest) -> None:
    trace = ingest({"displayTimeUnit": "ns", "traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1,
                                                                "ts": 1.5, "dur": 0.25}]})
    assert (by_name(trace)["a"]["ts_ns"], by_name(trace)["a"]["dur_ns"]) == (1_500, 250)


def test_counters_instants_async_and_unknown_phases(ingest: Ingest) -> None:
    trace = ingest([
        {"ph": "C", "name": "queue", "pid": 1, "ts": 1, "args": {"depth": 3}},
        {"ph": "C", "name": "queue", "pid": 1, "ts": 2, "args": {"depth": 5}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"used": 10, "free": 90}},
        {"ph": "i", "name": "tick", "pid": 1, "tid": 1, "ts": 4, "s": "g"},
        {"ph": "b", "cat": "io", "name": "read", "id": "0x1", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "e", "cat": "io", "name": "read", "id": "0x1", "pid": 1, "tid": 2, "ts": 6},
        {"ph": "Z", "name": "mystery", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
    ])
    tracks = {r["track_id"]: r for r in trace.tables["tracks"].to_pylist()}
    series = {tracks[r["track_id"]]["label"]: [] for r in trace.tables["counters"].to_pylist()}
    for r in trace.tables["counters"].to_pylist():
        series[tracks[r["track_id"]]["label"]].append(r["value"])
    assert series == {"queue": [3.0, 5.0], "mem.used": [10.0], "mem.free": [90.0]}
    assert by_name(trace)["read"]["dur_ns"] == 5_000
    assert {n for (n,) in rows(trace.tables["instants"], "name")} == {"tick", "mystery"}
    assert warning_codes(trace)["unknown_event"] == 1


def test_flow_steps_bind_to_enclosing_and_next_slices(ingest: Ingest) -> None:
    trace = ingest([
        {"ph": "X", "name": "send", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "recv", "pid": 2, "tid": 2, "ts": 20, "dur": 5},
        {"ph": "X", "name": "bwd", "pid": 1, "tid": 1, "ts": 40, "dur": 5},
        {"ph": "s", "cat": "ipc", "name": "msg", "id": 1, "pid": 1, "tid": 1, "ts": 5},
        {"ph": "f", "cat": "ipc", "name": "msg", "id": 1, "pid": 2, "tid": 2, "ts": 15},
        {"ph": "s", "cat": "fwdbwd", "name": "fb", "id": 2, "pid": 1, "tid": 1, "ts": 1},
        {"ph": "f", "cat": "fwdbwd", "name": "fb", "id": 2, "pid": 1, "tid": 1, "ts": 41, "bp": "e"},
    ])
    s = by_name(trace)
    flows = set(rows(trace.tables["flows"], "from_slice", "to_slice", "kind"))
    assert flows == {(s["send"]["slice_id"], s["recv"]["slice_id"], "generic"),
                     (s["send"]["slice_id"], s["bwd"]["slice_id"], "fwdbwd")}


def test_old_kineto_categories_and_string_tids(ingest: Ingest) -> None:
    trace = ingest({"traceEvents": [
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": "1", "ts": 100, "dur": 10,
         "args": {"External id": 5}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "1", "ts": 102, "dur": 3,
         "args": {"correlation": 8, "external id": 5}},
        {"ph": "X", "cat": "Kernel", "name": "add_kernel", "pid": 0, "tid": "stream 7", "ts": 120, "dur": 4,
         "args": {"correlation": 8, "external id": 5}},
    ]})
    s = by_name(trace)
    assert [s[n]["lane"] for n in ("aten::add", "cudaLaunchKernel", "add_kernel")] == \
        ["framework", "runtime", "hardware"]
    assert s["add_kernel"]["op_id"] == s["aten::add"]["slice_id"]


# ---- the phase table: each row of PHASE_RULES is a test row -----------------------------------------

ANCHORS = [{"ph": "X", "name": "anchor", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
           {"ph": "X", "name": "target", "pid": 2, "tid": 2, "ts": 200, "dur": 100}]


def ev(ph: str, **fields: Any) -> dict[str, Any]:
    return {"ph": ph, "name": "ev", "cat": "c", "pid": 1, "tid": 1, "ts": 10, **fields}


# phase -> (events besides the anchors, what they become), read off the Trace Event Format spec
PHASE_CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "X": ([ev("X", dur=5)], {"slices": ["ev"]}),
    "B": ([ev("B"), ev("E", ts=15)], {"slices": ["ev"]}),
    "E": ([ev("E")], {"warnings": {"unmatched_end": 1}}),
    "M": ([ev("M", name="thread_name", args={"name": "main"})], {"anchor_track": "main"}),
    **{ph: ([ev(ph)], {"instants": ["ev"]}) for ph in ("i", "I", "R", "n", "O", "N", "D", "P")},
    "C": ([ev("C", args={"depth": 3})], {"counters": ["ev"]}),
    "s": ([ev("s", id=1, ts=50), ev("f", id=1, pid=2, tid=2, ts=250, bp="e")], {"flows": 1}),
    "t": ([ev("s", id=1, ts=50), ev("t", id=1, pid=2, tid=2, ts=250)], {"flows": 1}),
    "f": ([ev("f", ts=250)], {"warnings": {"unknown_event": 1}}),  # a flow step without an id
    "b": ([ev("b", id=1), ev("e", id=1, ts=30)], {"slices": ["ev"]}),
    "e": ([ev("e", id=1)], {"warnings": {"unknown_event": 1}}),  # an end without its begin
    "S": ([ev("S", id=1), ev("F", id=1, ts=30)], {"slices": ["ev"]}),
    "F": ([ev("F", id=1)], {"warnings": {"unknown_event": 1}}),
    "T": ([ev("T", id=1)], {"instants": ["ev"]}),
    "p": ([ev("p", id=1)], {"instants": ["ev"]}),
    "Z": ([ev("Z")], {"instants": ["ev"], "warnings": {"unknown_event": 1}}),  # not in the spec: kept, warned
}
NOTHING = {"slices": [], "instants": [], "counters": [], "flows": 0, "warnings": {}, "anchor_track": "thread 1"}


def landed(trace: IngestedTrace) -> dict[str, Any]:
    tracks = {r["track_id"]: r for r in trace.tables["tracks"].to_pylist()}
    s = by_name(trace)
    return {
        "slices": sorted(n for n in s if n not in ("anchor", "target")),
        "instants": sorted(n for (n,) in rows(trace.tables["instants"], "name")),
        "counters": sorted({tracks[t]["label"] for (t,) in rows(trace.tables["counters"], "track_id")}),
        "flows": trace.tables["flows"].num_rows,
        "warnings": warning_codes(trace),
        "anchor_track": tracks[s["anchor"]["track_id"]]["label"],
    }


@pytest.mark.parametrize("phase", sorted(PHASE_CASES))
def test_each_phase_lands_where_the_spec_puts_it(phase: str, ingest: Ingest) -> None:
    events, expected = PHASE_CASES[phase]
    assert landed(ingest(ANCHORS + events)) == {**NOTHING, **expected}


def test_every_phase_rule_is_a_test_row() -> None:
    phases = [ph for rule in PHASE_RULES for ph in rule.phases]
    assert len(phases) == len(set(phases))  # no phase in two rows
    assert set(PHASE_CASES) == {*phases, "Z"}
    where = {"slices": "slices", "instants": "instants", "counters": "counters", "flows": "flows",
             "anchor_track": "names"}
    for rule in PHASE_RULES:
        assert rule.note and all(callable(getattr(Feeder, rule.step, None)) for _ in rule.phases)
        assert where[next(iter(PHASE_CASES[rule.phases[0]][1]))] == rule.becomes


# ---- the Kineto arg names: each name of KINETO_ARG_NAMES is a test row, on both paths ----------------

ARG_COLUMN = {"external_id": "external_id", "correlation": "correlation", "input_dims": "shapes"}


@pytest.mark.parametrize(("field", "name"), [(f, n) for f, names in KINETO_ARG_NAMES.items() for n in names])
def test_each_kineto_arg_name_is_read(field: str, name: str, ingest: Ingest) -> None:
    value: Any = [[2, 3], [3]] if field == "input_dims" else 41
    trace = ingest([{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
                     "args": {name: value, "other": 1}}])
    [row] = trace.tables["slices"].to_pylist()
    got = row[ARG_COLUMN[field]]
    assert (json.loads(got) if field == "input_dims" else got) == value


def test_the_current_external_id_name_wins_over_the_2021_one(ingest: Ingest) -> None:
    trace = ingest([{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
                     "args": {"external id": 2, "External id": 1}}])
    assert [r["external_id"] for r in trace.tables["slices"].to_pylist()] == [1]


def test_memory_instants_name_their_device_whatever_its_fields_type(ingest: Ingest) -> None:
    """[memory] instants become allocated / reserved counters per device; the device's fields are used as
    written (True is not 1, 1.0 is not 1, a list is kept as text), and each point keeps its exact time,
    whole µs or not (the fast paths hand whole ones to the feeder as integers)."""
    def memory(ts: float, device_type: Any, device_id: Any, allocated: int) -> dict[str, Any]:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 3, "tid": 3, "ts": ts,
                "s": "t", "args": {"Total Allocated": allocated, "Total Reserved": 2 * allocated,
                                   "Device Type": device_type, "Device Id": device_id}}

    events = [{"ph": "X", "name": "op", "pid": 3, "tid": 3, "ts": 1, "dur": 1}, memory(2, 0, -1, 10),
              memory(2.5, 1, 0, 20), memory(3, True, 0, 30), memory(3.0005, 1.0, 0, 40),
              memory(4, [1], 0, 50), memory(5, 1, 0, 60), memory(6, 0, -1, 70)]
    trace = ingest(events)
    tracks = {r["track_id"]: r["label"] for r in trace.tables["tracks"].to_pylist() if r["kind"] == "counter"}
    points: dict[str, list[tuple[int, float]]] = {}
    for r in trace.tables["counters"].to_pylist():
        points.setdefault(tracks[r["track_id"]], []).append((r["ts_ns"], r["value"]))
    assert points["memory allocated (CPU) [bytes]"] == [(2_000, 10.0), (6_000, 70.0)]
    assert points["memory allocated (device 1:0) [bytes]"] == [(2_500, 20.0), (5_000, 60.0)]
    assert points["memory reserved (device 1:0) [bytes]"] == [(2_500, 40.0), (5_000, 120.0)]
    assert points["memory allocated (device True:0) [bytes]"] == [(3_000, 30.0)]
    assert points["memory allocated (device 1.0:0) [bytes]"] == [(3_001, 40.0)]  # 3.0005 µs: half up
    assert points["memory allocated (device [1]:0) [bytes]"] == [(4_000, 50.0)]


def test_memory_totals_are_read_as_the_per_event_path_reads_them(ingest: Ingest, request: pytest.FixtureRequest,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast paths take typical [memory] args apart column-wise and leave the rest to the per-event step;
    every path stores the same points: a bool total is 1.0, a text or null total none, a missing device is the
    CPU, an integer too large for a float is skipped (it crashed the ingest), args that are no object nothing.
    A counter event's integer too large for a float is skipped too."""
    def memory(ts: int, args: Any) -> dict[str, Any]:
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 4, "tid": 4, "ts": ts, "s": "t",
                "args": args}

    events = [{"ph": "X", "name": "op", "pid": 4, "tid": 4, "ts": 1, "dur": 1},
              memory(2, {"Total Allocated": 10, "Total Reserved": 20}),
              memory(3, {"Total Allocated": True, "Total Reserved": 30, "Device Type": 0}),
              memory(4, {"Total Allocated": "40", "Total Reserved": None, "Device Type": 0, "Device Id": -1}),
              memory(5, {"Total Allocated": 10**400, "Total Reserved": 50}),
              memory(6, [1, 2]),
              memory(7, {"Total Allocated": -0.0, "Total Reserved": 2**70, "Addr": 1, "Bytes": -4}),
              {"ph": "C", "name": "big", "pid": 4, "tid": 4, "ts": 8, "args": {"a": 10**400, "b": 1}}]
    per_event: list[object] = []
    step = Feeder._memory
    monkeypatch.setattr(Feeder, "_memory", lambda self, ev, ts_ns: (per_event.append(ev.ts), step(self, ev, ts_ns)))
    trace = ingest(events)
    # the fast paths leave only the odd ones to the per-event step
    assert per_event == ([2, 3, 4, 5, 6, 7] if request.node.callspec.params["ingest"] == "msgspec" else [3, 4, 6])
    tracks = {r["track_id"]: r["label"] for r in trace.tables["tracks"].to_pylist() if r["kind"] == "counter"}
    points: dict[str, list[tuple[int, float]]] = {}
    for r in trace.tables["counters"].to_pylist():
        points.setdefault(tracks[r["track_id"]], []).append((r["ts_ns"], r["value"]))
    assert points == {"memory allocated (CPU) [bytes]": [(2_000, 10.0), (3_000, 1.0), (7_000, 0.0)],
                      "memory reserved (CPU) [bytes]": [(2_000, 20.0), (3_000, 30.0), (5_000, 50.0),
                                                        (7_000, float(2**70))],
                      "big.b": [(8_000, 1.0)]}


def test_a_complete_event_without_dur_is_a_zero_length_slice(ingest: Ingest) -> None:
    trace = ingest([{"ph": "X", "name": "whole", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
                    {"ph": "X", "name": "no dur", "pid": 1, "tid": 1, "ts": 2.5}])
    s = by_name(trace)
    assert (s["no dur"]["ts_ns"], s["no dur"]["dur_ns"]) == (2_500, 0)
    assert s["no dur"]["parent_id"] == s["whole"]["slice_id"]

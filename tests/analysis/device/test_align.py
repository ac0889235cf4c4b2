"""A device profile against its nc_exec_running slice: inside (the slack is the uncertainty), sticking out (the
clocks disagree by at least that much), not linked; and the device export fixture through the API, checked against
its own SystemProfileEvents and Metadata rows read here."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.analysis.device.align import compute_alignment
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths

EXPORT = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "device_export"
E = 1_748_779_200_000_000_000  # epoch ns: beyond float64's exact integers


@pytest.mark.parametrize(("profile", "slice_", "within", "offsets", "uncertainty"), [
    ((E + 100, E + 900), (E, E + 1000), True, (100, 100), 200),
    ((E, E + 1000), (E, E + 1000), True, (0, 0), 0),
    ((E - 30, E + 900), (E, E + 1000), False, (-30, 100), 30),
    ((E + 100, E + 1250), (E, E + 1000), False, (100, -250), 250),
])
def test_alignment_against_the_execution_slice(profile: tuple[int, int], slice_: tuple[int, int], within: bool,
                                               offsets: tuple[int, int], uncertainty: int) -> None:
    got = compute_alignment(*profile, *slice_)
    assert (got["method"], got["within"], got["start_offset_ns"], got["end_offset_ns"], got["uncertainty_ns"]) == (
        "execution_slice", within, *offsets, uncertainty)


def test_an_unlinked_profile_is_unchecked() -> None:
    assert compute_alignment(E, E + 5, None, None) == {"method": "none", "within": None, "start_offset_ns": None,
                                                       "end_offset_ns": None, "uncertainty_ns": None, "shift_ns": 0,
                                                       "shift_min_ns": None, "shift_max_ns": None}


@pytest.mark.parametrize(("profile", "slice_", "shift", "bounds"), [
    ((E + 100, E + 900), (E, E + 1000), 0, (-100, 100)),  # inside: drawn as captured
    ((E - 30, E + 900), (E, E + 1000), 30, (30, 100)),  # 30 ns early: the smallest shift that fits
    ((E + 100, E + 1250), (E, E + 1000), -175, (-100, -250)),  # longer than the slice: centred on it
    ((E + 5000, E + 5800), (E, E + 1000), -4800, (-5000, 200 - 5000)),  # far late: moved back to fit its end
    ((E + 100, E + 1301), (E, E + 1000), -201, (-100, -301)),  # longer by 301 ns: centred, rounded down
])
def test_the_shift_onto_the_host_clock(profile: tuple[int, int], slice_: tuple[int, int], shift: int,
                                       bounds: tuple[int, int]) -> None:
    """The shift is the one nearest 0 among those that put the profile inside its slice (exact integers beyond
    2**53); a profile longer than its slice is centred on it."""
    got = compute_alignment(*profile, *slice_)
    assert (got["shift_ns"], got["shift_min_ns"], got["shift_max_ns"]) == (shift, *bounds)
    assert all(isinstance(got[k], int) for k in ("shift_ns", "shift_min_ns", "shift_max_ns"))
    lo, hi = profile[0] + shift, profile[1] + shift
    if bounds[0] <= bounds[1]:
        assert slice_[0] <= lo and hi <= slice_[1]
    else:
        assert lo - slice_[0] in (slice_[1] - hi, slice_[1] - hi - 1)


def test_the_fixture_profiles_through_the_api() -> None:
    events = pq.read_table(EXPORT / "system@latest" / "SystemProfileEvents.parquet").to_pylist()
    execs = [e for e in events if e["name"] == "nc_exec_running"]
    app = create_app(Settings(data_dir=Path(tempfile.mkdtemp()) / "data"))
    run = ingest_paths(app.state.explorer.store, [EXPORT], "align").id
    with TestClient(app) as client:
        for profile in ("matmul", "rmsnorm_naive"):
            meta = pq.read_table(EXPORT / f"{profile}@latest" / "Metadata.parquet").to_pylist()[0]
            lo, hi = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
            best = max(execs, key=lambda e: min(hi, e["end_ts"]) - max(lo, e["start_ts"]))
            view = client.get(f"/api/runs/{run}/device/{profile}").json()
            before, after = lo - best["start_ts"], best["end_ts"] - hi
            assert view["alignment"]["start_offset_ns"] == before and view["alignment"]["end_offset_ns"] == after
            detail = client.get(f"/api/runs/{run}/events/{view['profile']['system_slice_id']}").json()
            assert detail["device_profile"]["alignment"] == view["alignment"]
            assert 'id="device-alignment"' in client.get(f"/runs/{run}/device/{profile}").text


def test_each_profile_against_its_linked_slice() -> None:
    """compute_profile_alignments: a profile's `system_slice_id` is the position of its slice in the slices table;
    an unlinked one (-1) or one pointing past the table keeps its own clock."""
    import pyarrow as pa

    from explorer.analysis.device.align import build_alignment_rows, compute_profile_alignments

    slices = pa.table({"ts_ns": pa.array([E - 10, E + 5000], pa.int64()), "dur_ns": pa.array([5, 1000], pa.int64())})
    profiles = pa.table({"profile_id": ["late", "free", "lost"], "name": ["late", "free", "lost"], "nc_id": [0, 1, 2],
                         "start_ns": pa.array([E + 5900, E, E], pa.int64()), "end_ns": pa.array([E + 6300, E + 9, E + 9],
                                                                                             pa.int64()),
                         "system_slice_id": pa.array([1, -1, 7], pa.int64())})
    got = compute_profile_alignments(profiles, slices)
    assert got["late"]["shift_ns"] == (E + 6000) - (E + 6300) == -300  # its end moved back onto the slice's
    assert got["free"]["method"] == got["lost"]["method"] == "none" and got["free"]["shift_ns"] == 0
    rows = build_alignment_rows(profiles, got, E)
    assert [(r["profile_id"], r["start_ns"], r["end_ns"]) for r in rows] == [("late", 5600, 6000), ("free", 0, 9),
                                                                             ("lost", 0, 9)]

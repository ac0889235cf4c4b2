"""Achieved rates on the ops and kernels pages: the run's ops' work (explorer.analysis.advice.efficiency) loaded
once from their args, summed per op row and per kernel name, against the device's peak (an unknown device gets
none). The ops and kernels builders (explorer.views.ops, explorer.views.kernels) call this; nothing here formats."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import pyarrow as pa
import pyarrow.parquet as pq

from explorer.analysis.advice.efficiency import WORK_OPS, Work, kernel_work, op_work, sum_work
from explorer.analysis.advice.peaks import find_peak
from explorer.analysis.kernels import KernelTable
from explorer.analysis.rank_slices import rank_track_ids
from explorer.model.shapes import OpRow, RatesBasis
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore


def run_device_model(rec: RunRecord) -> str:
    """The run's one GPU model from deviceProperties ("" for none, or for several models)."""
    names = {d.name for d in rec.summary.devices if d.source == "deviceProperties"}
    return names.pop() if len(names) == 1 else ""


def rates_basis(rec: RunRecord, device_run: bool) -> RatesBasis:
    """A run without device executions has rates over CPU time: no device peak applies to them."""
    device = run_device_model(rec)
    peak = find_peak(device) if device and device_run else None
    return {"device": device, "model": None if peak is None else peak.model,
            "source": None if peak is None else peak.source, "time_basis": "device" if device_run else "cpu"}


def load_op_work(store: RunStore, run_id: str) -> tuple[dict[int, Work], dict[int, tuple[str, str, int]]]:
    """The work of every op call the efficiency table knows (by slice id), and each such op's (name, shapes,
    track). A stored run never changes: the answer is kept per slices file (its path, size and time)."""
    path = store.table_path(run_id, "slices")
    st = path.stat()
    return _load_op_work(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _load_op_work(path: str, size: int, mtime_ns: int) -> tuple[dict[int, Work], dict[int, tuple[str, str, int]]]:
    cols = ("slice_id", "name", "shapes", "track_id", "args")
    t = pq.read_table(path, columns=list(cols), filters=[("is_op", "=", True), ("name", "in", list(WORK_OPS))])
    works: dict[int, Work] = {}
    keys: dict[int, tuple[str, str, int]] = {}
    for sid, name, shapes, track, args in zip(*(t.column(c).to_pylist() for c in cols), strict=True):
        w = op_work(str(name), args or "")
        if w is not None:
            works[int(sid)] = w
            keys[int(sid)] = (str(name), shapes or "", int(track))
    return works, keys


def add_op_work(store: RunStore, rec: RunRecord, rows: list[OpRow], by_shape: bool, device_total_ns: int,
                ranks: tuple[int, ...] | None = None) -> RatesBasis:
    """Give each op row its `work`: None unless every call's work is known (rates over the row's device total, or its
    CPU total on a host-only run); `ranks`: the rows are those ranks' alone. Returns what the rates compare with."""
    basis = rates_basis(rec, device_total_ns > 0)
    peak = find_peak(basis["device"]) if basis["model"] else None
    works, keys = load_op_work(store, rec.id)
    ids = list(works)
    if ranks is not None:
        mine = set(rank_track_ids(store.table(rec.id, "tracks"), ranks).tolist())
        ids = [i for i in ids if keys[i][2] in mine]
    sums = sum_work([keys[i][:2] if by_shape else (keys[i][0],) for i in ids], [works[i] for i in ids])
    for row in rows:
        s = sums.get((row["name"], row["input_shapes"]) if by_shape else (row["name"],))
        time_ns = row["device_total_ns"] if device_total_ns else row["cpu_total_ns"]
        row["work"] = s.rate(time_ns, peak) if s is not None and s.calls == row["calls"] and time_ns > 0 else None
    return basis


def with_kernel_work(table: KernelTable, store: RunStore, rec: RunRecord, tracks: pa.Array | None = None) -> KernelTable:
    """The kernel table with, per kernel name, the work of the executions an op launched alone
    (explorer.analysis.advice.efficiency.kernel_work); `tracks` keeps those tracks' executions (a rank filter)."""
    basis = rates_basis(rec, True)
    works, _ = load_op_work(store, rec.id)
    peak = find_peak(basis["device"]) if basis["model"] else None
    return replace(table, work=kernel_work(store.table(rec.id, "slices"), works, peak, tracks), rates=basis)

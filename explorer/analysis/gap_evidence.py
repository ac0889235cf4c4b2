"""Why a device was idle: the host activity that covers a gap between device executions (integer-ns interval
unions per name, process and thread), the cause rule that labels it, and the timeline window a gap or step
link opens. Only the gaps a page shows are explained, not every gap."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from explorer.analysis.intervals import overlapping, union_ns
from explorer.model.lanes import Lane
from explorer.model.shapes import HostActivity, TimeWindow

I64 = np.int64
HOST_ACTIVITY_TOP = 5  # host activities listed per gap
# A share is "most of the gap" at or above one half; every rule below uses it, in integer arithmetic.
MOST_NUM, MOST_DEN = 1, 2
LINK_MARGIN_DEN = 10  # a gap link shows the gap with 1/10 of its length on each side


def covers_most(covered_ns: int, gap_ns: int) -> bool:
    """covered_ns >= MOST_NUM/MOST_DEN of gap_ns, exactly."""
    return covered_ns * MOST_DEN >= gap_ns * MOST_NUM


def share_pct(covered_ns: int, gap_ns: int) -> int:
    """Whole percent of the gap covered, rounded down (99.7 % is 99 %)."""
    return covered_ns * 100 // max(gap_ns, 1)


def timeline_window(start: int, end: int, span_ns: int) -> TimeWindow:
    """The timeline window a link to [start, end) opens (ns relative to the run origin): the interval
    with 1/10 of its length on each side, clamped to [0, span_ns]; `hl_*` is the interval itself."""
    margin = (end - start) // LINK_MARGIN_DEN
    lo, hi = max(start - margin, 0), min(end + margin, max(span_ns, end))
    return {"start": lo, "end": hi, "hl_start": start, "hl_end": end,
            "query": f"start={lo}&end={hi}&hl_start={start}&hl_end={end}"}


@dataclass
class GapEvidence:
    """One gap explained: its cause, a sentence for it, and the host activities ranked by covered time."""

    cause: str
    cause_detail: str
    host_activity: list[HostActivity]
    top_activity: HostActivity | None


class HostEvidence:
    """The host (framework and runtime lane) slices of a run, sorted by start, and the runtime calls
    that name a cause: synchronize calls, memory copies, and the launch call of each execution."""

    def __init__(self, slices: pa.Table, tracks: pa.Table, flows: pa.Table) -> None:
        lane = slices.column("lane")
        host = pc.or_(pc.equal(lane, Lane.FRAMEWORK), pc.equal(lane, Lane.RUNTIME))
        idx = np.flatnonzero(np.asarray(pc.fill_null(host, False).to_numpy(zero_copy_only=False), bool))
        ts = slices.column("ts_ns").to_numpy().astype(I64)
        order = idx[np.argsort(ts[idx], kind="stable")]
        self.idx = order
        self.ts = ts[order]
        self.end = self.ts + slices.column("dur_ns").to_numpy().astype(I64)[order]
        self.end_max = np.maximum.accumulate(self.end)
        self.depth = slices.column("depth").to_numpy()[order]
        names = pc.dictionary_encode(pc.fill_null(slices.column("name"), "")).combine_chunks()
        self.names = names.dictionary.to_pylist()
        self.name_code = names.indices.to_numpy()[order]
        self.runtime = np.asarray(pc.equal(lane, Lane.RUNTIME).to_numpy(zero_copy_only=False), bool)[order]
        self.sync = self._flag(slices, order, pc.or_(pc.equal(slices.column("cat"), "cuda_sync"),
                                                     pc.match_substring(slices.column("name"), "Synchronize")))
        self.copy = self.runtime & self._flag(slices, order, pc.match_substring(slices.column("name"), "memcpy",
                                                                                 ignore_case=True))
        self._threads(slices, tracks, order)
        self._launches(slices, flows, ts)

    @staticmethod
    def _flag(slices: pa.Table, order: np.ndarray, mask: pa.ChunkedArray) -> np.ndarray:
        flags = np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool)
        picked: np.ndarray = flags[order]
        return picked

    def _threads(self, slices: pa.Table, tracks: pa.Table, order: np.ndarray) -> None:
        """Each host slice's thread code (process + thread) and the label to show for it."""
        tids = tracks.column("track_id").to_numpy()
        keys = [f"{p}\x00{t}" for p, t in zip(tracks.column("process").to_pylist(),
                                              tracks.column("thread").to_pylist(), strict=True)]
        codes: dict[str, int] = {}
        self.thread_labels: list[str] = []
        code_of_track = np.zeros(int(tids.max(initial=-1)) + 1, I64)
        for tid, key, label in sorted(zip(tids.tolist(), keys, tracks.column("label").to_pylist(), strict=True)):
            if key not in codes:
                codes[key] = len(codes)
                self.thread_labels.append(str(label or ""))
            code_of_track[tid] = codes[key]
        self.lane = np.where(self.runtime, Lane.RUNTIME.value, Lane.FRAMEWORK.value)
        self.thread = code_of_track[slices.column("track_id").to_numpy()[order]] if len(order) else np.zeros(0, I64)

    def _launches(self, slices: pa.Table, flows: pa.Table, ts: np.ndarray) -> None:
        """Per execution slice: the start and name of the runtime call that launched it (execute flows)."""
        execute = np.asarray(pc.equal(flows.column("kind"), "execute").to_numpy(zero_copy_only=False), bool)
        to = flows.column("to_slice").to_numpy()[execute]
        frm = flows.column("from_slice").to_numpy()[execute]
        ok = (to >= 0) & (to < slices.num_rows) & (frm >= 0) & (frm < slices.num_rows)
        self.launch_from = np.full(slices.num_rows, -1, I64)
        self.launch_from[to[ok]] = frm[ok]
        self.launch_ts = np.where(self.launch_from >= 0, ts[np.maximum(self.launch_from, 0)], np.iinfo(I64).min)
        self.slice_names = slices.column("name")

    def explain(self, gap_start: int, gap_end: int, after: int) -> GapEvidence:
        """The cause of the gap [gap_start, gap_end) (absolute ns) before execution `after`."""
        sel = overlapping(self.ts, self.end_max, self.end, gap_start, gap_end)
        a = np.maximum(self.ts[sel], gap_start)
        b = np.minimum(self.end[sel], gap_end)
        ranked = self._ranked(sel, a, b)
        sync = union_ns(a[self.sync[sel]], b[self.sync[sel]])
        copy = union_ns(a[self.copy[sel]], b[self.copy[sel]])
        return decide_cause(gap_end - gap_start, ranked, union_ns(a, b), sync, copy, self._launch(after, gap_start,
                                                                                                   gap_end))

    def _launch(self, after: int, gap_start: int, gap_end: int) -> tuple[str, int] | None:
        """The launch call of `after` and the part of the gap from that call to the execution."""
        src = int(self.launch_from[after])
        if src < 0:
            return None
        return str(self.slice_names[src].as_py()), gap_end - max(int(self.launch_ts[after]), gap_start)

    def _ranked(self, sel: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[tuple[HostActivity, int]]:
        """Host activities over the gap, (activity, depth), ranked by `rank_key`."""
        if not len(sel):
            return []
        key = self.name_code[sel].astype(I64) * (len(self.thread_labels) + 1) + self.thread[sel]
        order = np.lexsort((a, key))
        key, a, b, sel = key[order], a[order], b[order], sel[order]
        cuts = np.flatnonzero(np.diff(key)) + 1
        out: list[tuple[HostActivity, int]] = []
        for lo, hi in zip(np.append(0, cuts).tolist(), np.append(cuts, len(key)).tolist(), strict=True):
            i = int(sel[lo])
            out.append(({"name": self.names[int(self.name_code[i])], "lane": str(self.lane[i]),
                         "thread": self.thread_labels[int(self.thread[i])], "covered_ns": union_ns(a[lo:hi], b[lo:hi])},
                        int(self.depth[sel[lo:hi]].min())))
        return sorted(out, key=rank_key)


def rank_key(item: tuple[HostActivity, int]) -> tuple[int, int, str, str]:
    """Ranking of host activities: most covered time first, then the deeper frame, then by name and thread."""
    act, depth = item
    return -act["covered_ns"], -depth, act["name"], act["thread"]


def top_activity(ranked: list[tuple[HostActivity, int]], gap_ns: int) -> HostActivity | None:
    """The most informative activity: the deepest framework slice (op, user annotation, python frame)
    that covers most of the gap; when none does, the largest coverer of any lane."""
    most = [(act, depth) for act, depth in ranked if act["lane"] == Lane.FRAMEWORK and covers_most(act["covered_ns"],
                                                                                                   gap_ns)]
    if most:
        return max(most, key=lambda item: (item[1], item[0]["covered_ns"]))[0]
    return ranked[0][0] if ranked else None


def decide_cause(gap_ns: int, ranked: list[tuple[HostActivity, int]], host_ns: int, sync_ns: int, copy_ns: int,
                 launch: tuple[str, int] | None) -> GapEvidence:
    """The cause rule, first match wins ("most" = at least half the gap, `covers_most`):

    1. `synchronize`: synchronize calls (cuda_sync, `*Synchronize*`) cover most of the gap;
    2. `data transfer`: memcpy runtime calls cover most of the gap;
    3. `launch latency`: the next execution's launch call was made before most of the gap had passed,
       so the device waited for the launch to arrive (launch call start, or gap start, to execution);
    4. `host busy`: host slices cover most of the gap; the detail names `top_activity`;
    5. `idle host`: none of that - the host did not say what it was doing (or slept).
    """
    act = top_activity(ranked, gap_ns)
    top = [a for a, _ in ranked[:HOST_ACTIVITY_TOP]]
    if covers_most(sync_ns, gap_ns):
        name = _first(ranked, "Synchronize") or "synchronize"
        return GapEvidence("synchronize", f"synchronize: {name} ({share_pct(sync_ns, gap_ns)} %)", top, act)
    if covers_most(copy_ns, gap_ns):
        name = _first(ranked, "memcpy") or "memcpy"
        return GapEvidence("data transfer", f"data transfer: {name} ({share_pct(copy_ns, gap_ns)} %)", top, act)
    if launch is not None and covers_most(launch[1], gap_ns):
        return GapEvidence("launch latency", f"launch latency: {launch[0]} ({share_pct(launch[1], gap_ns)} %)", top, act)
    if act is not None and covers_most(host_ns, gap_ns):
        return GapEvidence("host busy", f"host busy: {act['name']} ({share_pct(act['covered_ns'], gap_ns)} %)", top, act)
    return GapEvidence("idle host", f"idle host: host slices cover {share_pct(host_ns, gap_ns)} %", top, act)


def _first(ranked: list[tuple[HostActivity, int]], part: str) -> str | None:
    """The best-ranked runtime call whose name contains `part` (any case)."""
    return next((a["name"] for a, _ in ranked if a["lane"] == Lane.RUNTIME and part.lower() in a["name"].lower()),
                None)

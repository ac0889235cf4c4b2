"""The JSON shapes the analysis returns and the API serves (each page context holds these objects, its JSON
twin's data), as TypedDicts: free at run time, every key checked by mypy, documented by pydantic in
/openapi.json, extra keys forbidden. Why TypedDicts: docs/architecture.md, "model/shapes.py"."""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from explorer.model.device_shapes import AlignmentJson
from explorer.model.summary import SummaryJson

STRICT = ConfigDict(extra="forbid")


# ---- runs ---------------------------------------------------------------------------------------

@with_config(STRICT)
class RunLinks(TypedDict):
    self: str
    page: str
    tracks: str
    timeline: str
    ops: str
    breakdown: str
    search: str
    sql: str


@with_config(STRICT)
class RunJson(TypedDict):
    """A run as GET /api/runs/{id} returns it (docs/API.md `Run`); `summary` is RunSummary's JSON."""

    id: str
    name: str
    status: str
    progress: float
    message: str
    tags: list[str]
    created_at: float
    sha256: str
    source: str
    summary: SummaryJson
    links: RunLinks


@with_config(STRICT)
class RunList(TypedDict):
    runs: list[RunJson]
    total: int
    limit: int
    offset: int


@with_config(STRICT)
class TrackRow(TypedDict):
    """One row of a run's tracks table (explorer.model.tables.TRACKS)."""

    track_id: int
    lane: str
    kind: str
    instance: str
    process: str
    thread: str
    label: str
    device: str
    sort_key: int
    max_depth: int
    count: int
    rank: NotRequired[int]  # -1 unknown (explorer.model.ranks); absent on device-profile tracks
    host: NotRequired[str]  # "" unknown
    device_profile: NotRequired[str]  # a Neuron device profile's track (explorer.analysis.device.tracks)
    group: NotRequired[str]  # the collapsible group a device track sits in ("<profile> · NC:0 · DMA input")


@with_config(STRICT)
class Tracks(TypedDict):
    """GET /api/runs/{id}/tracks: every track, in the tracks table's order (with `limit`: one page of them
    in the timeline's order), how many the run has, and the run's time origin."""

    origin_ns: int
    tracks: list[TrackRow]
    total: int


# ---- ranks (explorer.analysis.ranks) ------------------------------------------------------------

@with_config(STRICT)
class RankStep(TypedDict):
    """One ProfilerStep#N of a rank: its start relative to the run's origin and its length."""

    name: str
    start_ns: int
    dur_ns: int


@with_config(STRICT)
class RankEvidence(TypedDict):
    """Why a rank is a straggler: the rule that flagged it (`arrival` | `step_start` | `step_time`), by how
    much (ns past the median), and the op or kernel of the rank whose time most exceeds the same one on the
    reference rank."""

    rule: str
    late_ns: int
    collective: str  # the collective it arrives late to ("" for the step rules)
    kind: str  # op | kernel | "" (no op or kernel takes longer than on the reference rank)
    name: str
    rank: int
    reference_rank: int
    excess_ns: int


@with_config(STRICT)
class RankRow(TypedDict):
    """One rank of GET /api/runs/{id}/ranks: its steps and where its time went in its window (its steps'
    span, else its whole span), on its devices (`mode` device) or, host-only, on its framework threads."""

    rank: int
    host: str
    process: str
    mode: str  # device | host
    steps: list[RankStep]
    step_time_ns: int
    window_ns: int
    compute_ns: int
    comm_ns: int
    memcpy_ns: int
    exposed_comm_ns: int
    hidden_comm_ns: int
    idle_ns: int
    busy_pct: float
    arrival_late_ns: int  # the largest median lateness to a collective name (0 on the earliest arrivers)
    last_arrivals: int  # matched collectives it arrived last to (the collectives view's last_arriver)
    matched_collectives: int  # matched collectives (of two or more ranks) it is in
    wait_caused_ns: int  # the wait_ns of the collectives it arrived last to
    step_start_late_ns: int  # lower median of (its step start - the median rank's) over matched steps
    straggler: bool
    evidence: RankEvidence | None


@with_config(STRICT)
class RankCount(TypedDict):
    rank: int
    count: int


@with_config(STRICT)
class UnmatchedCollective(TypedDict):
    """A collective the ranks could not be matched on (the collectives view's mismatch): each rank's count."""

    name: str
    counts: list[RankCount]
    message: str


@with_config(STRICT)
class RanksResult(TypedDict):
    """GET /api/runs/{id}/ranks: one row per rank, the rule's median and constants, and the collectives
    that could not be matched across ranks by order."""

    ranks: list[RankRow]
    median_step_time_ns: int
    stragglers: list[int]
    rule: dict[str, float]
    unmatched: list[UnmatchedCollective]
    matched_collectives: int  # matched collectives of two or more ranks the arrival rule read
    latest_arriver: int | None  # the rank the others waited longest for (None: none matched)
    matched_steps: int  # steps (by name) every rank has once: the step-start rule's
    step_start_skew_ns: int  # the largest spread of one matched step's starts over ranks


# ---- op table -----------------------------------------------------------------------------------

@with_config(STRICT)
class OpWork(TypedDict):
    """Work done by an op row's calls or a kernel's executions, from the ops' recorded shapes and dtypes
    (explorer.analysis.advice.efficiency): `kind` gemm | conv | attention | elementwise | reduction | mixed;
    `flops` None for the memory-bound kinds; rates per second over `time_ns`; `peak_per_s` the device's peak for
    the kind (FLOP/s of the dtype for gemm/conv/attention, memory bytes/s otherwise; `peak_kind` says which), None
    on an unknown device."""

    kind: str
    dtype: str
    calls: int
    flops: int | None
    bytes: int
    time_ns: int
    flop_per_s: int | None
    bytes_per_s: int | None
    peak_per_s: int | None
    peak_kind: str | None  # BF16/FP16 tensor | FP32 | TF32 tensor | memory bandwidth
    pct_of_peak: float | None


@with_config(STRICT)
class RatesBasis(TypedDict):
    """What the rows' `work` rates are measured against: the run's device model ("" none or several), the peak
    table's row for it (None: unknown device, no peak) with its source, and the time the rates divide by."""

    device: str
    model: str | None
    source: str | None
    time_basis: str  # device | cpu


@with_config(STRICT)
class OpRow(TypedDict):
    """One op table row (explorer.model.tables.OP_STATS); `module` only when grouped by nn.Module."""

    module: NotRequired[str]
    name: str
    input_shapes: str
    kind: str
    calls: int
    cpu_total_ns: int
    self_cpu_ns: int
    cpu_avg_ns: int
    device_total_ns: int
    self_device_ns: int
    device_pct: float
    source_url: NotRequired[str]  # python view: the frame's vscode:// link (explorer.model.source_links)
    # memory columns (explorer.analysis.op_memory.OP_MEMORY): only when the run has [memory] events
    allocated_bytes: NotRequired[int]
    self_allocated_bytes: NotRequired[int]
    allocations: NotRequired[int]
    self_allocations: NotRequired[int]
    net_bytes: NotRequired[int]
    self_net_bytes: NotRequired[int]
    peak_bytes: NotRequired[int]
    self_peak_bytes: NotRequired[int]
    work: NotRequired[OpWork | None]  # FLOPs / bytes from the calls' shapes; None unless every call's are known


@with_config(STRICT)
class OpMemorySummary(TypedDict):
    """What the op table's memory columns cover: one device's [memory] events; the self columns' sums plus
    `outside_*` equal the totals, the memory page's for that device (explorer.views.op_memory)."""

    device: str
    devices: list[str]  # every device with [memory] events (the columns show `device`: the highest peak)
    allocated_bytes: int
    allocations: int
    peak_bytes: int  # the device's peak (the maximum of Total Allocated)
    outside_allocated_bytes: int  # allocated outside every op
    outside_peak_bytes: int  # of the peak: allocations made outside every op, or before the profile


@with_config(STRICT)
class OpsResult(TypedDict):
    """GET /api/runs/{id}/ops: the rows of one view in one order, and what the order and view were."""

    rows: list[OpRow]
    device_total_ns: int
    attributed_ns: int  # device time launched by an op, frame or runtime call: the operators view's rows sum to it
    view: str
    sort: str
    has_modules: bool
    memory: NotRequired[OpMemorySummary]  # the memory columns' device and totals, when the rows have them
    rates: NotRequired[RatesBasis]  # what the rows' `work` rates compare with


# ---- kernels ------------------------------------------------------------------------------------

@with_config(STRICT)
class TopOp(TypedDict):
    name: str
    total_ns: int


@with_config(STRICT)
class LaunchConfig(TypedDict):
    """The most common launch config of a kernel name (explorer.analysis.kernels.LAUNCH)."""

    grid: list[int] | None
    block: list[int] | None
    registers_per_thread: int | None
    shared_memory: int | None
    est_occupancy_pct: float | None
    configs: int | None
    config_calls: int | None
    kernel_flop: int | None
    kernel_num_gb: float | None
    flop_per_s: float | None
    gb_per_s: float | None
    bytes: int | None


@with_config(STRICT)
class KernelRow(TypedDict):
    """One kernel table row (explorer.analysis.kernels.KERNELS): device executions of one name."""

    name: str
    category: str
    calls: int
    total_ns: int
    avg_ns: int
    min_ns: int
    max_ns: int
    p50_ns: int
    p95_ns: int
    device_pct: float
    top_ops: list[TopOp]
    launch: LaunchConfig | None
    work: NotRequired[OpWork | None]  # from the shapes of the ops that launched these executions alone


@with_config(STRICT)
class KernelCategory(TypedDict):
    category: str
    calls: int
    total_ns: int
    device_pct: float


@with_config(STRICT)
class KernelsResult(TypedDict):
    """GET /api/runs/{id}/kernels: rows (filtered, sorted, cut) and the whole run's categories."""

    rows: list[KernelRow]
    device_total_ns: int
    categories: list[KernelCategory]
    rates: NotRequired[RatesBasis]


# ---- breakdown ----------------------------------------------------------------------------------

@with_config(STRICT)
class LaneBusy(TypedDict):
    lane: str
    busy_ns: int
    idle_ns: int
    busy_pct: float
    slices: int
    excluded_slices: int


@with_config(STRICT)
class DeviceBusy(TypedDict):
    """One device: the union of its executions (all its streams and sub-rows), and the rest of the span."""

    device: str
    track_id: int
    busy_ns: int
    busy_pct: float
    idle_ns: int
    executions: int


@with_config(STRICT)
class SliceRef(TypedDict):
    slice_id: int
    name: str | None


@with_config(STRICT)
class HostActivity(TypedDict):
    """What one host thread did during a gap: a slice name, united over its slices clipped to the gap."""

    name: str
    lane: str
    thread: str
    covered_ns: int


@with_config(STRICT)
class TimeWindow(TypedDict):
    """The timeline window a link opens (relative ns): `start`/`end` with a margin, `hl_*` highlighted;
    `query` is the timeline page's query string for it."""

    start: int
    end: int
    hl_start: int
    hl_end: int
    query: str


@with_config(STRICT)
class Gap(TypedDict):
    """A gap between two device executions, relative ns, with its cause from the host evidence
    (explorer.analysis.gap_evidence.decide_cause) and the top host activities over it."""

    start: int
    end: int
    dur_ns: int
    device: str
    rank: int | None  # the rank of the gap's device track (None: no rank information)
    before: SliceRef
    after: SliceRef
    cause: str
    cause_detail: str
    host_activity: list[HostActivity]
    top_activity: HostActivity | None
    timeline: TimeWindow


@with_config(STRICT)
class Gaps(TypedDict):
    """Every gap between a device's executions (count, total); `largest` lists those of at least
    `min_gap_ns` with their cause; `short_count`/`short_ns` are the shorter ones, counted but not listed."""

    count: int
    total_ns: int
    largest: list[Gap]
    min_gap_ns: int
    short_count: int
    short_ns: int


@with_config(STRICT)
class GraphLaunches(TypedDict):
    """CUDA/HIP graph launches on the host, and how many of them have no device execution in the trace
    (linked by correlation id or flow): the profiler recorded none of their kernels."""

    launches: int
    without_device_work: int
    hides_device_work: bool  # such launches, and no device busy 1 % of the span: busy % is not a reading


@with_config(STRICT)
class Breakdown(TypedDict):
    """GET /api/runs/{id}/breakdown: busy/idle per lane and per device, and the device gaps."""

    lanes: list[LaneBusy]
    devices: list[DeviceBusy]
    gaps: Gaps
    graphs: GraphLaunches


# ---- steps --------------------------------------------------------------------------------------

@with_config(STRICT)
class StepRow(TypedDict):
    """One step (relative ns): its time and the device time in it by part, in priority order
    (explorer.analysis.steps.STEP_PARTS); the parts plus `idle_ns` add up to `dur_ns`. On a multi-rank run
    `rank` is the step's rank and the device time that rank's own (None on a run of one rank)."""

    name: str
    rank: int | None
    start: int
    end: int
    dur_ns: int
    busy_ns: int
    busy_pct: float
    compute_ns: int
    communication_ns: int
    memcpy_ns: int
    memset_ns: int
    other_ns: int
    idle_ns: int
    timeline: TimeWindow


@with_config(STRICT)
class StepsResult(TypedDict):
    """GET /api/runs/{id}/steps: the steps marked by `annotation` (a name prefix), one row per (rank, step)
    on a multi-rank run; the slowest row's index and each rank's slowest row's (rank order), the ranks."""

    annotation: str
    count: int
    steps: list[StepRow]
    slowest: int | None
    slowest_by_rank: list[int]
    ranks: list[int]


# ---- compare ------------------------------------------------------------------------------------

@with_config(STRICT)
class CompareBaseline(TypedDict):
    id: str
    reason: str
    tag: str


@with_config(STRICT)
class CompareSide(TypedDict):
    id: str
    name: str
    tags: list[str]
    device_total_ns: int
    cpu_total_ns: int
    span_ns: int  # 0: unknown (a rank of a run)
    step_ns: int | None  # median step; None: no steps
    step_count: int
    step_annotation: str
    busy_pct: float | None  # the busiest device's busy %
    devices: list[dict[str, Any]]  # RunSummary.devices
    world_size: int | None


@with_config(STRICT)
class HeadlineFigure(TypedDict):
    """One metric's total per run (baseline first), its delta and % change against the baseline."""

    metric: str
    totals_ns: list[int]
    deltas_ns: list[int]
    pct_change: list[float | None]


@with_config(STRICT)
class Headline(TypedDict):
    """The compare metric (`step_ns` median step, `span_ns`, else `device_total_ns` / `cpu_total_ns`) per
    run (baseline first), its delta and % change; `secondary` the summed device (or CPU) time when the
    metric is a step or span; per run the busiest device's busy % and whether it is host-bound."""

    baseline: str | None
    metric: str
    totals_ns: list[int]
    deltas_ns: list[int]
    pct_change: list[float | None]
    secondary: HeadlineFigure | None
    busy_pct: list[float | None]
    host_bound: list[bool]


@with_config(STRICT)
class CompareWarning(TypedDict):
    """What makes compared runs unlike: `code` devices | world_size | step_count | step_annotation."""

    code: str
    message: str


@with_config(STRICT)
class DiffRow(TypedDict):
    """One name across the compared runs: per run its values (None: absent), per other run the delta."""

    name: str
    status: str
    per_run: list[dict[str, int] | None]
    vs_baseline: list[dict[str, Any]]


@with_config(STRICT)
class KernelTotals(TypedDict):
    id: str
    calls: int
    total_ns: int


@with_config(STRICT)
class KernelCompare(TypedDict):
    runs: list[KernelTotals]
    rows: list[DiffRow]


@with_config(STRICT)
class MemoryOwnerDelta(TypedDict):
    """One owner (op or module) at two peaks: its live bytes at the run's and at the baseline's."""

    owner: str
    bytes: int
    baseline_bytes: int
    delta: int


@with_config(STRICT)
class MemoryPeakDelta(TypedDict):
    """One device's peak against the baseline's (explorer.analysis.memory.compare_peaks); each breakdown's deltas
    sum to `delta` (the breakdowns hold "(allocated before the profile)" too)."""

    device: str
    bytes: int
    baseline_bytes: int
    delta: int
    by_owner: list[MemoryOwnerDelta]  # what is live at each run's peak, by owner op, the biggest change first
    by_module: list[MemoryOwnerDelta]  # ... by innermost nn.Module ("(no module)" outside any)


@with_config(STRICT)
class MemoryCompare(TypedDict):
    """A run's memory against the baseline's on the compare page: per device both have, the peaks and their
    difference by owner (cut to the biggest changes, the rest summed in one row: the deltas still sum)."""

    run_id: str
    baseline_id: str
    peaks: list[MemoryPeakDelta]


@with_config(STRICT)
class CompareResult(TypedDict):
    """GET /api/compare: the runs op by op and kernel by kernel against the baseline (listed first)."""

    baseline: CompareBaseline
    runs: list[CompareSide]
    headline: Headline
    warnings: list[CompareWarning]
    sort: str
    rows: list[DiffRow]
    kernels: KernelCompare
    memory: NotRequired[list[MemoryCompare]]  # issue 38: when the baseline and another run have [memory] events


@with_config(STRICT)
class RankCompareResult(TypedDict):
    """GET /api/runs/{id}/ranks/compare: rank `a` against rank `b` (the baseline), op by op and kernel by
    kernel; `reason` says whether the ranks were chosen or are the slowest against the median rank."""

    a: int
    b: int
    reason: str
    compare: CompareResult


# ---- check (the CI regression gate) -------------------------------------------------------------

@with_config(STRICT)
class CheckRun(TypedDict):
    id: str
    name: str


@with_config(STRICT)
class CheckRow(TypedDict):
    """One metric of GET /api/check: its value in both runs (ns), the delta and the verdict against the
    threshold (`regression` | `improvement` | `ok`)."""

    metric: str
    baseline_ns: int
    candidate_ns: int
    delta_ns: int
    pct_change: float | None
    verdict: str
    unit: str  # what the *_ns values count: "ns", or "bytes" for peak_memory


@with_config(STRICT)
class CheckResult(TypedDict):
    """GET /api/check: the candidate run against the baseline, metric by metric; `passed` is false when
    any metric regressed by more than `max_regression_pct`."""

    baseline: CheckRun
    candidate: CheckRun
    max_regression_pct: float
    rows: list[CheckRow]
    regressions: int
    passed: bool


# ---- timeline -----------------------------------------------------------------------------------

@with_config(STRICT)
class TrackWindow(TypedDict, total=False):
    """One track in a window: columns (relative ns) of its wide slices and per-pixel merged ones, or
    its counter samples, or its instants, by `kind`."""

    track_id: int
    kind: str
    slices: dict[str, list[int]]
    merged: dict[str, list[int]]
    counter: dict[str, list[float]]
    instants: dict[str, list[Any]]
    py_levels: int  # a with_stack track's deepest Python stack (explorer.analysis.timeline.fold)
    op_levels: int  # and the rows its other slices take with the Python frames folded


# an arrow between two slices: ids, endpoints (slice ids, tracks, relative ns) and kind; `from` is a
# keyword, hence the functional form
WindowFlow = TypedDict("WindowFlow", {"id": int, "from": int, "to": int, "kind": str, "from_track": int,
                                      "to_track": int, "from_ts": int, "to_ts": int})
WindowFlow.__pydantic_config__ = STRICT  # type: ignore[attr-defined]


@with_config(STRICT)
class TrackSummary(TypedDict):
    """The tracks of one lane a window does not send in full (beyond what fits `height_px`): how many,
    and their busy ns per pixel column (the union of their top-level slices)."""

    lane: str
    tracks: int
    busy_ns: list[int]


@with_config(STRICT)
class TimelineWindow(TypedDict):
    """GET /api/runs/{id}/timeline: a level-of-detail window; names are indexes into `names`. Bounded in
    total: `tracks` are those that fit the window's height, `summaries` stand for the others."""

    origin_ns: int
    start_ns: int
    end_ns: int
    width_px: int
    ns_per_px: float
    names: list[str]
    tracks: list[TrackWindow]
    flows: list[WindowFlow]
    flows_truncated: bool
    summaries: list[TrackSummary]
    tracks_summarised: int


# ---- events, search, SQL ----------------------------------------------------------------------

@with_config(STRICT)
class ChildrenSummary(TypedDict):
    count: int
    top: list[dict[str, Any]]


@with_config(STRICT)
class EventDetail(TypedDict):
    """GET /api/runs/{id}/events/{slice_id}: the slice (args parsed), its parents, children and the
    linked chain across lanes (relative ns in `ts_rel_ns`)."""

    event: dict[str, Any]
    parents: list[dict[str, Any]]
    children: ChildrenSummary
    chain: list[dict[str, Any]]
    device_profile: NotRequired[DeviceProfileLink]  # an nc_exec_running slice's device profile
    source_url: NotRequired[str]  # vscode:// link of the slice's Python frame or call stack (source_links)


@with_config(STRICT)
class DeviceProfileLink(TypedDict):
    """The device profile an nc_exec_running slice executed; its span in relative ns."""

    profile_id: str
    name: str
    nc_id: int
    start_ns: int
    end_ns: int
    alignment: NotRequired[AlignmentJson]  # how the profile sits on the system axis (explorer.analysis.device.align)


@with_config(STRICT)
class RangeDeviceSummary(TypedDict):
    """The device Summary of a timeline range cut to one profile's span (relative ns); metrics named as the
    export's Summary fields (explorer.analysis.device.summary)."""

    profile: str
    name: str
    start_ns: int
    end_ns: int
    metrics: dict[str, int | float]


@with_config(STRICT)
class RangeDeviceSummaries(TypedDict):
    """GET /api/runs/{id}/timeline/device-summary: one summary per device profile the range overlaps."""

    summaries: list[RangeDeviceSummary]


@with_config(STRICT)
class SearchMatch(TypedDict):
    slice_id: int
    name: str
    lane: str
    track_id: int
    ts: int
    dur: int


@with_config(STRICT)
class SearchResult(TypedDict):
    """GET /api/runs/{id}/search: how many slices match over the whole run, the first ones in time order."""

    count: int
    matches: list[SearchMatch]


@with_config(STRICT)
class SqlResult(TypedDict):
    """POST /api/runs/{id}/sql: the result's columns and rows, cut at the row limit (`truncated`)."""

    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    elapsed_ms: float


@with_config(STRICT)
class SqlColumn(TypedDict):
    name: str
    type: str  # DuckDB's type name, as a query sees the column


@with_config(STRICT)
class SqlTable(TypedDict):
    name: str
    rows: int
    note: str
    columns: list[SqlColumn]


@with_config(STRICT)
class SqlExampleJson(TypedDict):
    key: str
    title: str
    sql: str


@with_config(STRICT)
class SqlSchema(TypedDict):
    """GET /api/runs/{id}/sql/schema: the tables a query sees, their columns and row counts, example queries."""

    tables: list[SqlTable]
    examples: list[SqlExampleJson]


@with_config(STRICT)
class PerfettoTrace(TypedDict):
    """GET /api/runs/{id}/export?format=perfetto-json: a Chrome JSON trace (docs/API.md, "Perfetto export");
    `baseTimeNanoseconds` (Kineto's key) when times are written relative to a whole-second origin."""

    otherData: dict[str, str]
    traceEvents: list[dict[str, Any]]
    baseTimeNanoseconds: NotRequired[int]


@with_config(STRICT)
class NeuronHealth(TypedDict):
    """GET /api/v1/health."""

    status: str
    version: str


@with_config(STRICT)
class NeuronSearchResult(TypedDict):
    """POST /api/v1/db/{name}/_search: `columns`..`elapsedMs` answer a databaseExplorerQuery, `fields` a
    tableSchema, `files` and `databases` a listDbFiles (docs/API.md)."""

    type: str
    name: str
    tableName: NotRequired[str]
    columns: NotRequired[list[str]]
    data: NotRequired[list[dict[str, Any]]]
    rowCount: NotRequired[int]
    truncated: NotRequired[bool]
    elapsedMs: NotRequired[float]
    fields: NotRequired[list[dict[str, Any]]]
    files: NotRequired[list[dict[str, Any]]]
    databases: NotRequired[list[str]]


# ---- collectives matched across ranks (explorer/analysis/collectives.py) ---------------------------

@with_config(STRICT)
class CollectiveRank(TypedDict):
    rank: int
    arrival_ns: int  # relative to the run origin, like every time below
    start_ns: int
    end_ns: int
    wait_ns: int  # last arrival - own arrival, >= 0
    slice_id: int  # the execution (kernel, gloo annotation, cc_ slice) of this rank


@with_config(STRICT)
class CollectiveRow(TypedDict):
    name: str  # canonical: allreduce, allgather, reducescatter, alltoall, broadcast, ...
    process_group: str
    seq: int  # the trace's sequence number, or the 0-based order of the name in its group (matched_by)
    matched_by: str  # seq | order
    size_bytes: int | None
    dtype: str
    ranks: list[CollectiveRank]
    wait_ns: int  # sum of the ranks' wait_ns
    transfer_ns: int
    last_arriver: int
    algbw: float | None  # GB/s (bytes per ns)
    busbw: float | None  # GB/s
    timeline: TimeWindow  # first arrival .. last end, highlighted


@with_config(STRICT)
class CollectiveMismatch(TypedDict):
    name: str
    process_group: str
    seq: int | None  # None: the whole (group, name) could not be paired by order
    ranks_present: list[int]
    ranks_missing: list[int]
    counts: dict[str, int]  # rank (as text) -> how many of this collective it has
    message: str


@with_config(STRICT)
class CollectivesResult(TypedDict):
    rows: list[CollectiveRow]
    total: int  # matched collectives before the limit
    ranks: list[int]
    mismatches: list[CollectiveMismatch]
    total_wait_ns: int
    sort: str


@with_config(STRICT)
class CollectiveLink(TypedDict):
    name: str
    process_group: str
    seq: int
    last_arriver: int
    ranks: list[int]
    slice_ids: list[int]  # the ranks' executions, in the order of `ranks`


@with_config(STRICT)
class CollectiveLinks(TypedDict):
    links: list[CollectiveLink]


# ---- fleet --------------------------------------------------------------------------------------

@with_config(STRICT)
class FleetPoint(TypedDict):
    """One run of a fleet series: the name's calls and total ns in it (0 where absent), against the run
    before it and against the median of the runs before it (`median_prev_ns`: the lower middle)."""

    id: str
    run: str
    created_at: float
    tags: list[str]
    page: str
    calls: int
    total_ns: int
    avg_ns: int
    delta_prev_ns: int | None
    pct_prev: float | None
    median_prev_ns: int | None
    pct_median: float | None
    verdict: str  # first | ok | regression | improvement


@with_config(STRICT)
class FleetSuggestion(TypedDict):
    name: str
    total_ns: int


@with_config(STRICT)
class FleetResult(TypedDict):
    """GET /api/fleet/ops: one op's (or kernel's) device time across the last N ready runs matching the
    filter, oldest first; `note` says why `runs` is empty when it is."""

    name: str
    kind: str
    tag: str
    run_name: str
    last: int
    max_regression_pct: float
    runs_matched: int
    runs: list[FleetPoint]
    regressions: int
    suggestions: list[FleetSuggestion]
    note: str

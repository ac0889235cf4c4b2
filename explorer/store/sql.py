"""Read-only SQL over one run's tables, in a fresh in-memory DuckDB that cannot touch files or the network:
exactly one SELECT, run in a memory-bounded worker (explorer.store.sql_worker) with a time and row limit.
The bounds: docs/security.md, "SQL"."""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from explorer.errors import QueryRejected, ServerBusy
from explorer.model.shapes import SqlColumn, SqlExampleJson, SqlSchema, SqlTable
from explorer.store.runs import RunStore
from explorer.store.sql_worker import SqlWorkers

log = logging.getLogger(__name__)

# Every query of this process shares these bounds (a server runs many at once): at most
# MAX_CONCURRENT_QUERIES run together, each with its share of TOTAL_MEMORY_MB, so DuckDB never holds
# more than that; a query waits for a slot up to its own time limit, then is refused as busy. A result
# stops at its row limit or at MAX_RESULT_BYTES of values (`truncated: true`), whichever comes first.
MAX_CONCURRENT_QUERIES = 2
TOTAL_MEMORY_MB = 2048
MAX_RESULT_BYTES = 16 * 2**20
FETCH_BATCH = 256
INTERRUPT_AGAIN_S = 0.2  # past the time limit, a query is interrupted this often until it stops
_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_QUERIES)


def free_slots() -> int:
    """How many of the MAX_CONCURRENT_QUERIES query slots are free now (a test waits on it)."""
    return int(_SLOTS._value)

SQL_TABLES = ("slices", "tracks", "flows", "counters", "instants", "op_stats", "op_stats_by_shape")
MAX_SQL_CHARS = 20_000
LOCKED_CONFIG = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 2,
    "memory_limit": f"{TOTAL_MEMORY_MB // MAX_CONCURRENT_QUERIES}MB",
}

HIDDEN_PATHS = {"home_directory": "/nonexistent", "secret_directory": "/nonexistent", "temp_directory": ""}


@dataclass
class SqlResult:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool
    elapsed_ms: float


def check_select(sql: str) -> None:
    """Allow exactly one SELECT statement (WITH ... SELECT included); reject everything else."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRejected(f"query is longer than {MAX_SQL_CHARS} characters")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRejected(f"cannot parse the query: {exc}") from None
    if len(statements) != 1:
        raise QueryRejected(f"exactly one statement is allowed, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryRejected(f"only SELECT queries are allowed, not {kind.name}")


def run_sql(store: RunStore, run_id: str, sql: str, timeout_s: float, max_rows: int, *,
            tables: Mapping[str, pa.Table] | None = None, views: Mapping[str, str] | None = None) -> SqlResult:
    """Run one read-only SELECT over the run's tables, in a worker process (sql_worker); QueryRejected on
    refusal, error, timeout or a query that needs more memory than a query may use. `tables` (Arrow, in memory)
    and `views` (name -> SELECT over the tables) are added under their names."""
    check_select(sql)
    job = {"tables": _table_paths(store, run_id), "extra": dict(tables or {}), "views": dict(views or {}),
           "sql": sql, "timeout_s": timeout_s, "max_rows": max_rows}
    if not _SLOTS.acquire(timeout=timeout_s):
        raise ServerBusy(f"{MAX_CONCURRENT_QUERIES} queries are running; try again in a moment")
    try:
        result: SqlResult = _workers().query(job, timeout_s)
        return result
    finally:
        _SLOTS.release()


_POOL: list[SqlWorkers] = []
_POOL_LOCK = threading.Lock()


def _workers() -> SqlWorkers:
    """This process's SQL workers (made on first use)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(SqlWorkers(warm_worker, execute_job))
        return _POOL[0]


def warm_worker(_: object) -> None:
    """In a new worker: what every query needs loaded, before its address space is bounded."""
    with _connect({}) as con:
        con.execute("select 1").fetchall()


def execute_job(job: dict[str, Any]) -> SqlResult:
    """In a worker: run_sql's query, over the tables at the job's paths."""
    with _connect(job["tables"], job["extra"], job["views"]) as con:
        return _execute(con, job["sql"], job["timeout_s"], job["max_rows"])


def _table_paths(store: RunStore, run_id: str) -> dict[str, str]:
    store.require_ready(run_id)
    return {name: str(path) for name in SQL_TABLES if (path := store.table_path(run_id, name)).exists()}


@contextmanager
def _sandbox(store: RunStore, run_id: str) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, ds.Dataset]]]:
    """A locked in-memory DuckDB with the run's tables registered (and those tables by name), in this process:
    for what runs no query of a user's (the schema)."""
    paths = _table_paths(store, run_id)
    with _connect(paths) as con:
        yield con, {name: ds.dataset(path, format="parquet") for name, path in paths.items()}


@contextmanager
def _connect(paths: Mapping[str, str], extra: Mapping[str, pa.Table] | None = None,
             views: Mapping[str, str] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked in-memory DuckDB with the Parquet tables at `paths` registered as Arrow datasets, plus `extra`
    Arrow tables and `views` under their names."""
    # the paths DuckDB would show in duckdb_settings() (the server user's home, its working folder) are set to
    # nothing first: external access is switched off after them, as DuckDB refuses that order otherwise
    config = {k: v for k, v in LOCKED_CONFIG.items() if k != "enable_external_access"} | HIDDEN_PATHS
    con = duckdb.connect(":memory:", config=config)  # type: ignore[arg-type]
    try:
        con.execute("SET enable_external_access = false")
        for name, path in paths.items():
            con.register(name, ds.dataset(path, format="parquet"))
        for name, table in (extra or {}).items():
            con.register(name, table)
        for name, select in (views or {}).items():
            con.execute(f'CREATE VIEW "{name}" AS {select}')
        con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()


def _execute(con: duckdb.DuckDBPyConnection, sql: str, timeout_s: float, max_rows: int) -> SqlResult:
    timed_out, done = threading.Event(), threading.Event()

    def interrupt() -> None:
        """At the time limit, interrupt the query, and again every INTERRUPT_AGAIN_S until it has stopped: an
        interrupt that lands while DuckDB is not yet (or no longer) checking for one is lost, and a query left
        running would hold its slot, and the server's shutdown, for ever."""
        if done.wait(timeout_s):
            return
        timed_out.set()
        while not done.is_set():
            con.interrupt()
            done.wait(INTERRUPT_AGAIN_S)

    watcher = threading.Thread(target=interrupt, name="sql-time-limit", daemon=True)
    started = time.perf_counter()
    watcher.start()
    rows: list[list[Any]] = []
    truncated = False
    try:
        con.execute(sql)
        columns = [d[0] for d in (con.description or [])]
        size = 0
        while batch := con.fetchmany(FETCH_BATCH):
            for row in batch:
                if len(rows) == max_rows or size > MAX_RESULT_BYTES:
                    truncated = True
                    break
                values = [_jsonable(v) for v in row]
                size += sum(_approx_bytes(v) for v in values)
                rows.append(values)
            if truncated:
                break
    except duckdb.Error as exc:
        if timed_out.is_set():
            raise QueryRejected(f"query stopped at the time limit of {timeout_s:g} s") from None
        raise QueryRejected(f"query failed: {exc}") from None
    finally:
        done.set()
        watcher.join()  # before the connection closes: it must not be interrupted once closed
    elapsed_ms = (time.perf_counter() - started) * 1000
    return SqlResult(columns, rows, truncated, round(elapsed_ms, 3))


def _approx_bytes(value: Any) -> int:
    """About what a value costs in the JSON answer (strings by length, containers by their items)."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, list):
        return sum(_approx_bytes(v) for v in value) + 2
    if isinstance(value, dict):
        return sum(len(str(k)) + _approx_bytes(v) for k, v in value.items()) + 2
    return 8


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta | decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


# ---- the SQL page: what it lists beside the editor, and the CSV form of a result -----------------

SQL_TABLE_NOTES = {
    "slices": "every span: ts_ns/dur_ns absolute integer ns; lane framework|runtime|hardware|other; "
              "device_time marks device executions that count as device time",
    "tracks": "one row per thread, stream or counter series (kind slice|counter|instant)",
    "flows": "arrows between slices (kind launch|execute|fwdbwd|generic)",
    "counters": "counter samples (memory, utilization...): value per track_id and ts_ns",
    "instants": "instant events with their args",
    "op_stats": "the op table per name (key_averages()): times in ns",
    "op_stats_by_shape": "the op table per name and input shapes",
}


@dataclass(frozen=True)
class SqlExample:
    """One example query of the SQL page; every example is tested on real traces (tests/store/test_sql_examples.py)."""

    key: str
    title: str
    sql: str


SQL_EXAMPLES = (
    SqlExample("top_kernels", "Top device executions (kernels, copies) by total time", """\
select name, count(*) as calls, sum(dur_ns) as total_ns, cast(avg(dur_ns) as bigint) as avg_ns,
       max(dur_ns) as max_ns
from slices
where lane = 'hardware' and device_time
group by name
order by total_ns desc
limit 50"""),
    SqlExample("ops_by_shape", "Ops by input shape (self CPU time)", """\
select name, input_shapes, calls, self_cpu_ns, cpu_total_ns, device_total_ns
from op_stats_by_shape
order by self_cpu_ns desc
limit 50"""),
    SqlExample("gaps_1ms", "Device idle gaps over 1 ms", """\
with hw as (
  select t.device, s.name, s.ts_ns, s.ts_ns + s.dur_ns as end_ns
  from slices s join tracks t using (track_id)
  where s.lane = 'hardware' and s.device_time
), ordered as (
  select *, max(end_ns) over (partition by device order by ts_ns, end_ns
                              rows between unbounded preceding and 1 preceding) as prev_end_ns
  from hw
)
select device, prev_end_ns as gap_start_ns, ts_ns - prev_end_ns as gap_ns, name as next_execution
from ordered
where ts_ns - prev_end_ns > 1000000
order by gap_ns desc
limit 100"""),
    SqlExample("memory_peaks", "Memory peaks per counter series", """\
select t.label as series, cast(max(c.value) as bigint) as peak_bytes, arg_max(c.ts_ns, c.value) as peak_ts_ns,
       count(*) as samples
from counters c join tracks t using (track_id)
where t.label like 'memory%'
group by t.label
order by peak_bytes desc"""),
    SqlExample("slowest_ops", "Slowest single framework ops", """\
select name, dur_ns, ts_ns, shapes
from slices
where lane = 'framework' and is_op
order by dur_ns desc
limit 50"""),
)


def load_sql_schema(store: RunStore, run_id: str) -> SqlSchema:
    """The run's SQL tables with their columns (DuckDB's types, as a query sees them) and row counts,
    and the example queries."""
    with _sandbox(store, run_id) as (con, tables):
        out: list[SqlTable] = []
        for name, dataset in tables.items():
            columns: list[SqlColumn] = [{"name": str(row[0]), "type": str(row[1])}
                                        for row in con.execute(f'describe "{name}"').fetchall()]
            out.append({"name": name, "rows": dataset.count_rows(), "note": SQL_TABLE_NOTES.get(name, ""),
                        "columns": columns})
    examples: list[SqlExampleJson] = [{"key": e.key, "title": e.title, "sql": e.sql} for e in SQL_EXAMPLES]
    return {"tables": out, "examples": examples}


def csv_cell(value: Any) -> str:
    """A JSON result value as CSV text: empty for null, true/false, JSON for lists and maps."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def iter_sql_csv(result: SqlResult, chunk_rows: int = 1000) -> Iterator[str]:
    """The result as CSV (header first, RFC 4180 quoting), in chunks of rows for a streamed response."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(result.columns)
    for i, row in enumerate(result.rows, 1):
        writer.writerow([csv_cell(v) for v in row])
        if i % chunk_rows == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()

"""Fleet queries: one op's (or kernel's) numbers across many stored runs by one DuckDB query over their
Parquet, read in place from the run storage, locked like the SQL page's (explorer/store/sql.py) and sharing
its slots. Which runs is the caller's choice; what the numbers mean is explorer/views/fleet.py's."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb
from fsspec import AbstractFileSystem

from explorer.errors import BadRequest, QueryRejected, ServerBusy
from explorer.store.runs import RunStore
from explorer.store.sql import _SLOTS, LOCKED_CONFIG, MAX_CONCURRENT_QUERIES

# kind -> (the table file, its name filter, the calls and total-ns expressions). An op's device time is
# the op table's device_total_ns of the operators view (the regression gate's op:NAME, explorer/views/check.py);
# a kernel's is the summed duration of device executions of that name (the gate's kernel:NAME).
FLEET_KINDS: dict[str, tuple[str, str, str, str]] = {
    "op": ("op_stats", "kind = 'operator'", "sum(calls)", "sum(device_total_ns)"),
    "kernel": ("slices", "coalesce(device_time, false)", "count(*)", "sum(dur_ns)"),
}
SUGGESTIONS = 12


@dataclass(frozen=True)
class FleetCell:
    """One run's numbers for the name: calls and total ns (both 0 where the run has no such name)."""

    calls: int
    total_ns: int


def check_kind(kind: str) -> str:
    if kind not in FLEET_KINDS:
        raise BadRequest(f"unknown kind {kind!r}; kinds: {', '.join(FLEET_KINDS)}")
    return kind


def load_fleet_series(store: RunStore, run_ids: Sequence[str], kind: str, name: str,
                      timeout_s: float) -> tuple[dict[str, FleetCell], list[tuple[str, int]]]:
    """Per run id, the name's calls and total ns (runs without it are absent); and the most expensive
    names over all these runs (name, total ns), for the form's suggestions. One connection, two queries."""
    table, where, calls, total = FLEET_KINDS[check_kind(kind)]
    paths = {url: rid for rid, url in store.table_urls(run_ids, table).items()}
    if not paths:
        return {}, []
    # union_by_name: a run stored by an older version may lack a column the others have (NULL there)
    files = "read_parquet($files, filename = true, union_by_name = true)"
    series_sql = (f"select filename, {calls}, {total} from {files} where {where} and name = $name "
                  "group by filename")
    top_sql = (f"select name, {total} as t from {files} where {where} group by name "
               f"order by t desc, name limit {SUGGESTIONS}")
    with _locked(list(paths), timeout_s, store.storage.duckdb_filesystem()) as con:
        rows = _run(con, series_sql, {"files": list(paths), "name": name}, timeout_s)
        top = _run(con, top_sql, {"files": list(paths)}, timeout_s)
    cells = {paths[str(f)]: FleetCell(int(c), int(t or 0)) for f, c, t in rows}
    return cells, [(str(n), int(t or 0)) for n, t in top]


@contextmanager
def _locked(files: list[str], timeout_s: float,
            filesystem: AbstractFileSystem | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB that may read these files and nothing else, with the SQL page's limits (a
    query waits for a slot up to its own time limit, as run_sql's do); `filesystem`: the fsspec filesystem
    the files are on, when DuckDB cannot read them natively (never httpfs: it would be downloaded)."""
    if not _SLOTS.acquire(timeout=timeout_s):
        raise ServerBusy(f"{MAX_CONCURRENT_QUERIES} queries are running; try again in a moment")
    # file access is switched off only after allowed_paths is set (DuckDB refuses that order otherwise)
    config = {k: v for k, v in LOCKED_CONFIG.items() if k != "enable_external_access"}
    con = duckdb.connect(":memory:", config=config)  # type: ignore[arg-type]
    try:
        if filesystem is not None:
            con.register_filesystem(filesystem)
        con.execute("SET allowed_paths = $files", {"files": files})
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()
        _SLOTS.release()


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any], timeout_s: float) -> list[tuple[Any, ...]]:
    """Execute with a timer that interrupts the query at the time limit."""
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, interrupt)
    timer.start()
    try:
        return con.execute(sql, params).fetchall()
    except duckdb.Error as exc:
        if timed_out.is_set():
            raise QueryRejected(f"fleet query stopped at the time limit of {timeout_s:g} s") from None
        raise QueryRejected(f"fleet query failed: {exc}") from None
    finally:
        timer.cancel()

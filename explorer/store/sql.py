"""Read-only SQL over one run's tables, in a fresh in-memory DuckDB that cannot touch files or the network.

The run's tables are registered as Arrow datasets (Arrow reads the Parquet, DuckDB never opens a
path); external access, extension loading and configuration changes are switched off before the
query runs. Exactly one SELECT statement is allowed, checked with DuckDB's own parser. A timer
interrupts the query at the time limit; results stop at the row limit.
"""

from __future__ import annotations

import datetime
import decimal
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from explorer.errors import QueryRejected
from explorer.store.runs import RunStore

log = logging.getLogger(__name__)

SQL_TABLES = ("slices", "tracks", "flows", "counters", "instants", "op_stats", "op_stats_by_shape")
MAX_SQL_CHARS = 20_000
LOCKED_CONFIG = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "threads": 2,
    "memory_limit": "2GB",
}


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
    """Run one read-only SELECT over the run's tables; QueryRejected on refusal, error or timeout.
    `tables` (Arrow, in memory) and `views` (name -> SELECT over the tables) are added under their names."""
    check_select(sql)
    store.require_ready(run_id)
    con = duckdb.connect(":memory:", config=dict(LOCKED_CONFIG))  # type: ignore[arg-type]
    try:
        for name in SQL_TABLES:
            path = store.table_path(run_id, name)
            if path.exists():
                con.register(name, ds.dataset(path, format="parquet"))
        for name, table in (tables or {}).items():
            con.register(name, table)
        for name, select in (views or {}).items():
            con.execute(f'CREATE VIEW "{name}" AS {select}')
        con.execute("SET lock_configuration = true")
        return _execute(con, sql, timeout_s, max_rows)
    finally:
        con.close()


def _execute(con: duckdb.DuckDBPyConnection, sql: str, timeout_s: float, max_rows: int) -> SqlResult:
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, interrupt)
    started = time.perf_counter()
    timer.start()
    try:
        con.execute(sql)
        columns = [d[0] for d in (con.description or [])]
        fetched = con.fetchmany(max_rows + 1)
    except duckdb.Error as exc:
        if timed_out.is_set():
            raise QueryRejected(f"query stopped at the time limit of {timeout_s:g} s") from None
        raise QueryRejected(f"query failed: {exc}") from None
    finally:
        timer.cancel()
    elapsed_ms = (time.perf_counter() - started) * 1000
    rows = [[_jsonable(v) for v in row] for row in fetched[:max_rows]]
    return SqlResult(columns, rows, len(fetched) > max_rows, round(elapsed_ms, 3))


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

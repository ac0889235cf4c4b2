"""A query past its time limit stops even when DuckDB misses an interrupt (explorer.store.sql._execute
interrupts again until the query has stopped): a query left running would hold its slot for ever."""

from __future__ import annotations

import threading
import time
from typing import Any

import duckdb
import pytest

from explorer.errors import QueryRejected
from explorer.store import sql

SLOW = "select sum(a.range * b.range) from range(100000000) a, range(100000000) b"  # never ends by itself


class MissesInterrupts:
    """A connection whose first `lost` interrupts go nowhere, as one landing before DuckDB checks for it."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lost: int) -> None:
        self.con, self.lost, self.calls = con, lost, 0

    def interrupt(self) -> None:
        self.calls += 1
        if self.calls > self.lost:
            self.con.interrupt()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


@pytest.mark.parametrize("lost", [0, 1, 3])
def test_a_query_stops_at_its_time_limit_even_when_interrupts_are_lost(lost: int) -> None:
    con = duckdb.connect(":memory:")
    try:
        proxy = MissesInterrupts(con, lost)
        outcome: list[BaseException] = []

        def run() -> None:
            try:
                sql._execute(proxy, SLOW, 0.5, 10)  # type: ignore[arg-type]
            except BaseException as exc:
                outcome.append(exc)

        started = time.monotonic()
        runner = threading.Thread(target=run, daemon=True)  # a query that never stops fails the test, not hangs it
        runner.start()
        runner.join(timeout=30)
        took = time.monotonic() - started
        assert not runner.is_alive(), "the query ran on past its time limit"
        assert len(outcome) == 1 and isinstance(outcome[0], QueryRejected), outcome
        assert "time limit of 0.5 s" in outcome[0].message
        assert proxy.calls == lost + 1 or proxy.calls == lost + 2  # interrupted until it stopped, then left alone
        assert 0.5 <= took < 0.5 + (lost + 1) * sql.INTERRUPT_AGAIN_S + 5
    finally:
        con.close()


def test_a_quick_query_is_never_interrupted() -> None:
    con = duckdb.connect(":memory:")
    try:
        proxy = MissesInterrupts(con, 0)
        assert sql._execute(proxy, "select 41 + 1", 0.5, 10).rows == [[42]]  # type: ignore[arg-type]
        time.sleep(0.7)
        assert proxy.calls == 0
    finally:
        con.close()

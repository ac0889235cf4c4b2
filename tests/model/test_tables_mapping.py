"""explorer.model.tables.Tables: a run's tables by name, some still being made on a thread (the op tables,
beside the store's write): reading one waits for it alone and raises what its making raised."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pyarrow as pa
import pytest

from explorer.model.tables import IngestedTrace, Tables


def test_a_table_in_the_making_is_waited_for_when_read_and_the_others_are_not() -> None:
    ready = pa.table({"a": [1, 2]})
    later: Future[pa.Table] = Future()
    tables = Tables({"ready": ready, "later": later})
    assert tables["ready"] is ready and not later.done()  # read without waiting for the other
    made = pa.table({"b": [3]})
    threading.Timer(0.05, later.set_result, (made,)).start()
    assert tables["later"] is made  # waited for
    assert list(tables) == ["ready", "later"] and [name for name, _ in tables.items()] == ["ready", "later"]
    assert dict(tables.items()) == {"ready": ready, "later": made}


def test_what_the_making_raised_is_raised_where_the_table_is_read() -> None:
    failed: Future[pa.Table] = Future()
    failed.set_exception(ValueError("probe"))
    tables = Tables({"x": failed})
    with pytest.raises(ValueError, match="probe"):
        tables["x"]


def test_an_ingested_trace_holds_its_tables_as_tables() -> None:
    trace = IngestedTrace(tables={"slices": pa.table({"a": [1]})})
    assert isinstance(trace.tables, Tables) and trace.tables["slices"].num_rows == 1
    trace.tables["extra"] = pa.table({"b": [1]})
    del trace.tables["extra"]
    assert len(trace.tables) == 1 and "slices" in trace.tables

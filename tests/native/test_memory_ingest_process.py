"""A process that exists to ingest (explorer.native.memory.as_ingest_process) loads only what the ingest uses,
with Arrow's C++ default pool chosen before pyarrow loads (explorer.native.memory.ingest_environment):
neither pandas (pyarrow would import it at the first Arrow array made of a Python list) nor, when the compiled
reader reads the file, DuckDB, nor, into a catalog at this version's schema, Alembic, nor with a folder store and
a SQLite catalog, fsspec or SQLAlchemy's PostgreSQL dialect; and pyarrow works as before without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from explorer.config import Settings
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome import kscan
from explorer.native.memory import ARROW_POOL_VARIABLE
from explorer.runs.apart import IngestProcesses
from explorer.store.runs import RunStore

ROOT = Path(__file__).parents[2]


INGEST = r"""
import json, os, sys
pool_when_loaded = []  # ARROW_DEFAULT_MEMORY_POOL when pyarrow was first imported: Arrow's C++ default from then on

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" and not pool_when_loaded:
            pool_when_loaded.append(os.environ.get("ARROW_DEFAULT_MEMORY_POOL"))

sys.meta_path.insert(0, Watch())
from api.launch import main  # the console script's entry point
sys.argv = ["trace-explorer", "ingest", *sys.argv[1:]]
try:
    main()
finally:
    import gc
    print(gc.get_freeze_count())  # the objects the console script froze for the interpreter's exit
    print(json.dumps(pool_when_loaded))
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "duckdb", "alembic", "fsspec", "explorer")
                            or m.startswith(("sqlalchemy.dialects.", "pyarrow._")))))
"""


def test_the_cli_ingest_loads_only_what_it_uses(tmp_path: Path) -> None:
    assert kscan.available()
    RunStore(tmp_path / "data").catalog.close()  # the data folder exists: its catalog is at this version's schema
    trace = tmp_path / "trace.json"
    with trace.open("w") as f:  # past FAST_MIN_BYTES: the compiled reader's size
        f.write('{"traceEvents": [')
        f.write(",".join(f'{{"ph":"X","cat":"cpu_op","name":"aten::op{i % 40}","pid":1,"tid":{i % 2},'
                         f'"ts":{i * 3},"dur":2,"args":{{"External id":{i}}}}}' for i in range(110_000)))
        f.write("]}")
    assert trace.stat().st_size > chrome_fast.FAST_MIN_BYTES
    proc = subprocess.run([sys.executable, "-c", INGEST, str(trace), "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    *printed, frozen_line, pool_line, modules_line = proc.stdout.strip().splitlines()
    modules = set(json.loads(modules_line))
    # the exit skips its collections over every object the imports made (0.33-0.51 s of the process otherwise)
    assert int(frozen_line) > 10_000, proc.stderr[-3000:]
    # Parquet's writers allocate from Arrow's C++ default pool, chosen as pyarrow loads: the system allocator
    assert json.loads(pool_line) == ["system"], proc.stderr[-3000:]
    assert {"explorer.ingest.chrome.kscan", "explorer.runs.ingest"} <= modules, proc.stderr[-3000:]  # it did ingest
    assert not {m for m in modules if m.split(".")[0] in ("pandas", "duckdb", "alembic", "fsspec")}
    assert "pyarrow._parquet" in modules and not modules & {"pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs"}
    assert "sqlalchemy.dialects.sqlite" in modules and "sqlalchemy.dialects.postgresql" not in modules
    assert RunStore(tmp_path / "data").table(printed[-1], "slices").num_rows == 110_000


CHILD = r"""
import sys
from collections.abc import Iterator
from explorer.native.memory import as_ingest_process
as_ingest_process()
import pyarrow as pa
table = pa.table({"name": ["a", "b", None], "n": [1, 2, 3]})  # lists: pyarrow asks whether they are pandas'
assert table.column("n").to_pylist() == [1, 2, 3] and pa.array(["x"]).to_pylist() == ["x"]
assert "pandas" not in sys.modules
try:
    import pandas  # noqa: F401
except ModuleNotFoundError as exc:
    print(exc)
import pyarrow.fs, pyarrow.parquet as pq, tempfile, os  # a local write and read, without the remote filesystems
with tempfile.TemporaryDirectory() as d:
    pq.write_table(table, os.path.join(d, "t.parquet"))
    assert pq.read_table(os.path.join(d, "t.parquet")).equals(table)
print(sorted(m for m in ("pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs") if m in sys.modules),
      isinstance(pyarrow.fs.LocalFileSystem(), pyarrow.fs.FileSystem))
"""


def test_an_ingest_process_refuses_pandas_and_remote_filesystems() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "pandas is not loaded by an ingest process" in proc.stdout
    # nor pyarrow's remote filesystems (8.6 MiB): a local Parquet write and read work without them
    assert proc.stdout.strip().splitlines()[-1] == "[] True"


def test_a_process_that_has_pandas_keeps_it() -> None:
    code = ("import pandas, sys\nfrom explorer.native.memory import as_ingest_process\nas_ingest_process()\n"
            "import pandas.api\nprint(pandas.DataFrame({'a': [1]}).shape)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "(1, 1)", proc.stderr


FORKSERVER_CHILD = r"""
import multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor
preload = sys.argv[1:]
context = multiprocessing.get_context("forkserver")
context.set_forkserver_preload(preload)
REPORT = ("sorted(m for m in ('pandas', 'pyarrow._s3fs', 'pyarrow._gcsfs', 'pyarrow._azurefs') "
          f"if m in __import__('sys').modules), all(m in __import__('sys').modules for m in {preload!r})")
with ProcessPoolExecutor(1, mp_context=context) as pool:
    print(pool.submit(eval, REPORT).result())
"""


@pytest.mark.parametrize("which", ["ingest_apart", "parallel"])
def test_the_forkservers_children_start_as_ingest_processes(which: str) -> None:
    """explorer.runs.apart's and explorer.ingest.parallel's forkservers (a server's ingests, parse workers)
    import explorer.native.forkserver first: their children start with the parsers loaded, without pandas or
    pyarrow's remote filesystems."""
    from explorer.ingest import parallel
    from explorer.runs import apart as ingest_apart

    preload = {"ingest_apart": ingest_apart.PRELOAD, "parallel": parallel.PRELOAD}[which]
    assert preload[0] == "explorer.native.forkserver"
    proc = subprocess.run([sys.executable, "-c", FORKSERVER_CHILD, *preload], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "([], True)", proc.stderr


def test_the_ingest_modules_make_no_arrow_array_at_import() -> None:
    """The modules the forkservers preload after explorer.native.forkserver load no pandas by themselves (no
    module of the ingest makes an Arrow array of a Python list at import): a process that imports them before
    it is made an ingest process (a test, a notebook) does not pay for pandas either."""
    from explorer.ingest import parallel
    from explorer.runs import apart as ingest_apart

    for preload in (ingest_apart.PRELOAD[1:], parallel.PRELOAD[1:]):
        code = "import sys\n" + "".join(f"import {m}\n" for m in preload) + "print('pandas' in sys.modules)"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert proc.returncode == 0 and proc.stdout.strip() == "False", (preload, proc.stderr)


def test_a_server_starts_its_ingest_processes_with_the_system_pool(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """A server's ingests run in processes of a forkserver it starts (explorer.runs.apart): they inherit the
    variable from the server, set before the first of them starts; a value the user set is kept."""
    monkeypatch.delenv(ARROW_POOL_VARIABLE, raising=False)
    IngestProcesses(Settings(data_dir=tmp_path))
    assert os.environ[ARROW_POOL_VARIABLE] == "system"
    monkeypatch.setenv(ARROW_POOL_VARIABLE, "jemalloc")
    IngestProcesses(Settings(data_dir=tmp_path))
    assert os.environ[ARROW_POOL_VARIABLE] == "jemalloc"


RELEASE = r"""
import numpy as np
from explorer.native.memory import MMAP_THRESHOLD_BYTES, as_ingest_process, release
as_ingest_process()

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

size = MMAP_THRESHOLD_BYTES // 2  # under the threshold: from the heap, not a mapping of its own
blocks, pins = [], []
for _ in range(256):  # 256 MiB in the heap, each block followed by a small one that stays
    blocks.append(np.ones(size, np.uint8))
    pins.append(np.ones(4096, np.uint8))
before = rss_mib()
del blocks  # freed, but inside the heap: the top's trim cannot return them
freed = rss_mib()
release()
print(round(before), round(freed), round(rss_mib()))
"""


def test_release_returns_freed_heap_pages_of_an_ingest_process() -> None:
    """Blocks under MMAP_THRESHOLD_BYTES come from the heap and are reused without page faults; what a step
    freed there goes back to the system when the step ends (explorer.native.memory.release)."""
    proc = subprocess.run([sys.executable, "-c", RELEASE], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    before, freed, released = map(int, proc.stdout.split())
    assert freed > before - 64, (before, freed, released)  # still held: blocks inside the heap
    assert released < freed - 200, (before, freed, released)  # returned


def test_every_step_of_an_ingest_releases_what_it_freed() -> None:
    """The builder's TimeSplit calls `release` as each step ends, an interrupted step included."""
    from explorer.ingest.builder import TraceBuilder
    from explorer.model.split import TimeSplit

    calls: list[str] = []
    split = TimeSplit(lambda: calls.append("released"))
    with split.step("parse"):
        pass
    with pytest.raises(ValueError), split.step("sort"):
        raise ValueError("a step that fails")
    assert calls == ["released", "released"] and set(split.ns) == {"parse", "sort"}
    from explorer.native import memory

    assert TraceBuilder().split.after_step is memory.release


ROOMY = r"""
import ctypes
from explorer.native import memory
memory.as_ingest_process()

class MallInfo2(ctypes.Structure):  # glibc's struct mallinfo2: hblks counts the blocks mapped on their own
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
SIZE = 8 * 2**20  # between the usual threshold (2 MiB) and the roomy one (32 MiB)

def mapped_after_malloc():
    before = libc.mallinfo2().hblks
    block = libc.malloc(SIZE)
    mapped = libc.mallinfo2().hblks - before
    libc.free(block)
    return mapped

outside = mapped_after_malloc()
with memory.roomy_heap():
    inside = mapped_after_malloc()
after = mapped_after_malloc()
first, second = memory.roomy_heap(), memory.roomy_heap()  # two finishes that overlap
first.__enter__()
second.__enter__()
first.__exit__(None, None, None)
while_second = mapped_after_malloc()
second.__exit__(None, None, None)
print(outside, inside, after, while_second, mapped_after_malloc())
"""


def test_a_roomy_heap_holds_big_blocks_only_while_it_lasts() -> None:
    """Inside roomy_heap an 8 MiB block comes from the heap; before and after, it is a mapping of its own
    (glibc's own count of mapped blocks). Where two overlap, the heap stays roomy until the last one ends."""
    proc = subprocess.run([sys.executable, "-c", ROOMY], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "0", "1", "0", "1"]


def test_the_finishs_steps_run_in_a_roomy_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The finish's own steps (columns .. tracks) run inside roomy_heap; the op table, made beside the write,
    after it (its peak is the write's, kept to the usual thresholds)."""
    from contextlib import contextmanager

    from explorer.ingest import builder as builder_module
    from explorer.ingest.builder import TraceBuilder

    events: list[str] = []

    @contextmanager
    def recorded() -> Iterator[None]:
        events.append("enter")
        yield
        events.append("exit")

    b = TraceBuilder()
    real_step = b.split.step

    @contextmanager
    def step(name: str) -> Iterator[None]:
        events.append(name)
        with real_step(name):
            yield

    monkeypatch.setattr(builder_module, "roomy_heap", recorded)
    monkeypatch.setattr(b.split, "step", step)
    src = b.add_source("t", "")
    thread = b.thread(src, 1, 1)
    b.add_slice(thread, "cpu_op", "aten::mm", 1_000, 500)
    trace = b.finish()
    assert trace.tables["op_stats"].num_rows == 1  # waits for the op table's thread
    inside = events[events.index("enter") + 1:events.index("exit")]
    assert {"columns", "nesting", "sort", "tracks"} <= set(inside)
    assert "op_table" in events[events.index("exit"):]

"""Real torch.profiler(profile_memory=True, record_shapes=True, with_stack=True) CPU captures for the memory tests
(a small MLP whose activations dominate; optionally a tensor leaked per step, or activation checkpointing), with
torch's own key_averages() memory figures, and a plain json + decimal reader of the file (no explorer import)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

ACTIVE_STEPS = 3
WIDTH, HIDDEN = 256, 2048
# torch.autograd.profiler._filter_name: rows key_averages() leaves out (the op table too)
HIDDEN_NAMES = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                          "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                          "aten::is_leaf", "aten::output_nr", "aten::_version"})
OP_CATS = frozenset({"cpu_op", "user_annotation", "python_function"})


def train_profile(path: Path, batch: int, leak: bool = False) -> dict[str, Any]:
    """Train the MLP for a few steps under the profiler, write its Kineto trace to `path`; returns key_averages()
    memory per row name: {name: (cpu_memory_usage, self_cpu_memory_usage, count)}, and per (name, shapes text)."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, 10))
    x = torch.randn(batch * 16, WIDTH)
    leak_src = torch.randn(64, WIDTH)
    kept: list[Any] = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE_STEPS),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(2 + ACTIVE_STEPS):
            model(x).sum().backward()
            if leak:
                kept.append(torch.cumsum(leak_src, 0))
            prof.step()
    by_name = {e.key: (e.cpu_memory_usage, e.self_cpu_memory_usage, e.count) for e in prof.key_averages()}
    by_shape: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for e in prof.key_averages(group_by_input_shape=True):
        by_shape[e.key].append((e.cpu_memory_usage, e.self_cpu_memory_usage, e.count))
    return {"by_name": by_name, "by_shape": {k: sorted(v) for k, v in by_shape.items()}}


def train_profile_apart(path: Path, batch: int, leak: bool = False) -> dict[str, Any]:
    """train_profile in a fresh Python process: the Python frames around the profiled loop (with_stack records
    them, and key_averages() gives them memory) are then the same under any test runner (pytest-xdist's worker
    runs a test inside execnet's own frames, whose events start before the profile)."""
    code = ("import json, sys; from pathlib import Path; from tests.helpers.memory_profiles import train_profile; "
            "json.dump(train_profile(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == '1'), sys.stdout)")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code, str(path), str(batch), "1" if leak else "0"],
                          capture_output=True, text=True, timeout=600, cwd=root, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    return {"by_name": {k: tuple(v) for k, v in rows["by_name"].items()},
            "by_shape": {k: sorted(tuple(x) for x in v) for k, v in rows["by_shape"].items()}}


def blocks_profile(path: Path, checkpoint: bool, blocks: int = 4) -> None:
    """A stack of MLP blocks (Linear 4x wide, GELU, Linear back) trained for a few steps, each block under
    activation checkpointing or not: checkpointed, a block keeps only its input for the backward pass."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.checkpoint import checkpoint as ckpt

    torch.manual_seed(0)
    torch.set_num_threads(1)
    stack = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
                          for _ in range(blocks))
    x = torch.randn(128, WIDTH, requires_grad=True)

    def forward(h: Any) -> Any:
        for block in stack:
            h = ckpt(block, h, use_reentrant=False) if checkpoint else block(h)
        return h

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=ACTIVE_STEPS),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(2 + ACTIVE_STEPS):
            forward(x).sum().backward()
            prof.step()


def read_trace(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """([memory] events in time order (file order on ties), the op X events, baseTimeNanoseconds); times stay
    Decimal µs as written."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    events = doc["traceEvents"]
    mem = [e for e in events if e.get("name") == "[memory]"]
    mem = [e for _, e in sorted(enumerate(mem), key=lambda p: (Decimal(p[1]["ts"]), p[0]))]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in OP_CATS and e["name"] not in HIDDEN_NAMES]
    return mem, ops, int(doc.get("baseTimeNanoseconds", 0))


def row_name(name: str) -> str:
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


class OpIndex:
    """The op X events of each thread, to find the ops holding a time (closed intervals, as torch counts). An op
    that is the only child of an op of the same name is left out, as torch's EventList._remove_dup_nodes folds it
    (aten::sum calling its other overload)."""

    def __init__(self, ops: list[dict[str, Any]]) -> None:
        self.by_tid: dict[Any, list[tuple[Decimal, Decimal, dict[str, Any]]]] = defaultdict(list)
        for x in sorted(ops, key=lambda x: (Decimal(x["ts"]), -Decimal(x["dur"]))):
            t = Decimal(x["ts"])
            self.by_tid[x["tid"]].append((t, t + Decimal(x["dur"]), x))
        for tid, spans in self.by_tid.items():
            parent: list[int] = []
            stack: list[int] = []
            for k, (_t, end, _) in enumerate(spans):
                while stack and spans[stack[-1]][1] < end:  # (ops on one thread nest: the first that holds it)
                    stack.pop()
                parent.append(stack[-1] if stack else -1)
                stack.append(k)
            children = Counter(parent)
            self.by_tid[tid] = [s for k, s in enumerate(spans)
                                if not (parent[k] >= 0 and children[parent[k]] == 1
                                        and spans[parent[k]][2]["name"] == s[2]["name"])]

    def holding(self, e: dict[str, Any]) -> list[dict[str, Any]]:
        t = Decimal(e["ts"])
        return [x for s, end, x in self.by_tid[e["tid"]] if s <= t <= end]

    def innermost(self, e: dict[str, Any]) -> dict[str, Any] | None:
        """The latest-starting op holding the event (the shortest on ties)."""
        held = self.holding(e)
        return max(held, key=lambda x: (Decimal(x["ts"]), -Decimal(x["dur"]))) if held else None


def live_at_peak(mem: list[dict[str, Any]], among: list[int] | None = None) -> tuple[int, set[int]]:
    """(the first event at the maximum Total Allocated, of the events at positions `among` when given, the
    positions of the allocations live there), replaying allocations and frees by address."""
    where = list(range(len(mem))) if among is None else among
    totals = [mem[k]["args"]["Total Allocated"] for k in where]
    at = where[totals.index(max(totals))]
    live: dict[int, int] = {}
    for k, e in enumerate(mem[:at + 1]):
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = k
        else:
            live.pop(e["args"]["Addr"], None)
    return at, set(live.values())



def module_profile(path: Path) -> None:
    """The MLP as two nested blocks (`Net` of `Block`s of Linear and ReLU), a few training steps profiled with
    with_modules=True, so each op has an enclosing nn.Module path (Net_0/Block_1/Linear_0)."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    class Block(nn.Module):
        def __init__(self, n_in: int, n_out: int) -> None:
            super().__init__()
            self.linear = nn.Linear(n_in, n_out)
            self.act = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.act(self.linear(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.Sequential(Block(WIDTH, HIDDEN), Block(HIDDEN, WIDTH))

        def forward(self, x: Any) -> Any:
            return self.blocks(x)

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    x = torch.randn(64, WIDTH)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True,
                 with_modules=True, schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(4):
            model(x).sum().backward()
            prof.step()


def module_path_of(ops: list[dict[str, Any]]) -> dict[int, str]:
    """id() of each op X event -> its enclosing `nn.Module: ` frames on its thread, outermost first, joined by
    "/" ("" outside any): the frames whose interval holds the op's (the op itself left out)."""
    frames: dict[Any, list[tuple[Decimal, Decimal, dict[str, Any]]]] = defaultdict(list)
    for x in ops:
        if x["name"].startswith("nn.Module: "):
            t = Decimal(x["ts"])
            frames[x["tid"]].append((t, t + Decimal(x["dur"]), x))
    out: dict[int, str] = {}
    for x in ops:
        t = Decimal(x["ts"])
        end = t + Decimal(x["dur"])
        held = sorted(((s, -(e - s), f) for s, e, f in frames[x["tid"]] if s <= t and end <= e and f is not x),
                      key=lambda p: (p[0], p[1]))
        out[id(x)] = "/".join(f["name"][len("nn.Module: "):] for _, _, f in held)
    return out


# a constructed run of two ranks (one file each), with [memory] events written here on two devices: per rank,
# (name, ts µs, dur µs) of its ops on one thread and (ts µs, device type, address, bytes) of its events
RANK_OPS = [("ProfilerStep#1", "0", "1000"), ("aten::linear", "100", "300"), ("aten::addmm", "150", "100"),
            ("aten::relu", "500", "200"), ("aten::add", "800", "50.5")]


def rank_memory_events(rank: int) -> list[tuple[str, int, int, int]]:
    scale = rank + 1
    return [("160.25", 0, 0x1000, 1000 * scale), ("200", 1, 0x9000, 8192 * scale), ("520", 1, 0x9800, 2048),
            ("550", 0, 0x2000, 4096), ("600", 0, 0x1000, -1000 * scale), ("650", 1, 0x9000, -8192 * scale),
            ("810", 0, 0x3000, 512 * scale), ("900", 0, 0x4000, 64), ("1200", 0, 0x5000, 128)]


def write_rank_memory_traces(folder: Path) -> list[Path]:
    """Two Kineto files (distributedInfo.rank 0 and 1) of RANK_OPS and rank_memory_events, with the allocators'
    totals replayed per device; one event (1200 µs) falls outside every op."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in (0, 1):
        events: list[dict[str, Any]] = [
            {"ph": "X", "cat": "cpu_op", "name": n, "pid": 100 + rank, "tid": 1, "ts": Decimal(ts), "dur": Decimal(d),
             "args": {}} for n, ts, d in RANK_OPS]
        totals: Counter[int] = Counter()
        for ts, dev, addr, nbytes in rank_memory_events(rank):
            totals[dev] += nbytes
            events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100 + rank,
                           "tid": 1, "ts": Decimal(ts),
                           "args": {"Total Reserved": 0, "Total Allocated": totals[dev], "Bytes": nbytes,
                                    "Addr": addr, "Device Type": dev, "Device Id": 0}})
        doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}
        path = folder / f"rank{rank}.json"
        path.write_text(re.sub(r'"(ts|dur)": "([0-9.]+)"', r'"\1": \2', json.dumps(doc, default=str)))
        paths.append(path)
    return paths

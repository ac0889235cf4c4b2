"""A deterministic corpus of hostile ingest inputs, mutated from real traces.

Seeds are the real traces in ../shared/traces (cut to their first SEED_EVENTS events) or, when that folder
is absent, the project's own fixtures; Neuron seeds are the fixtures under tests/fixtures/neuron. Each seed
gets every mutation class below with a random.Random seeded from (CORPUS_SEED, seed name, class), so one
seed list always gives byte-identical inputs, whatever the order they are built in.

An input is one or more files (`FuzzInput.files`: relative path -> bytes); a single file is ingested as
that path, several as their folder, the way a user points the CLI at a capture folder. `json` says the
input is a plain JSON document, which the runner sends through both Chrome parser paths.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import io
import json
import random
import stat
import tarfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TESTS = Path(__file__).resolve().parent.parent
SHARED_TRACES = TESTS.parent.parent / "shared" / "traces"
CORPUS_SEED = 16_07
SEED_EVENTS = 600  # events kept from each real trace before mutating: inputs stay a few hundred KB
MAX_SEED_FILE = 1_600_000  # on-disk bytes; bigger real traces (50-90 MB raw) are left to bench/fuzz.py
LONG_STRING = 10 * 2**20
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # archive member times: fixed, so the corpus is byte-identical


@dataclass(frozen=True)
class FuzzInput:
    name: str  # unique: "<class>/<seed>/<n>"
    kind: str  # the mutation class
    files: dict[str, bytes] = field(hash=False)
    json: bool = False  # a plain JSON document: run it through both parser paths

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())

    def write(self, root: Path) -> Path:
        """Write the input under `root` (a fresh folder); returns the path to ingest."""
        for rel, data in self.files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if len(self.files) == 1:
            return root / next(iter(self.files))
        return root / Path(next(iter(self.files))).parts[0]


@dataclass(frozen=True)
class Seed:
    name: str
    doc: Any  # the parsed JSON (a dict with traceEvents, a list of events, or a Neuron document)
    raw: bytes  # doc serialized compactly


# ---------------------------------------------------------------------------------------------- seeds


def _load_json(path: Path) -> Any:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _cut(doc: Any) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return {**doc, "traceEvents": doc["traceEvents"][:SEED_EVENTS]}
    if isinstance(doc, list):
        return doc[:SEED_EVENTS]
    return doc


def _seed(name: str, doc: Any) -> Seed:
    return Seed(name, doc, json.dumps(doc, separators=(",", ":")).encode())


def chrome_seeds(shared: Path = SHARED_TRACES, n: int | None = None) -> list[Seed]:
    """Real Chrome/Kineto traces (and the two non-timeline JSON formats beside them), cut small; `n` of
    them spread evenly over the sorted list."""
    files = sorted(p for p in shared.rglob("*") if p.is_file() and p.suffix in (".json", ".gz")
                   and p.stat().st_size <= MAX_SEED_FILE) if shared.is_dir() else []
    if not files:
        files = [TESTS / "api" / "fixtures" / "tiny_kineto.json", TESTS / "fixtures" / "kineto_recursive_frames.json"]
    seeds = []
    for path in _spread(files, n):
        try:
            doc = _load_json(path)
        except ValueError:  # speedscope's deliberately truncated samples: mutated as bytes below
            continue
        seeds.append(_seed(path.name.split(".")[0][:40], _cut(doc)))
    return seeds


def neuron_json_seeds() -> list[Seed]:
    root = TESTS / "fixtures" / "neuron"
    files = sorted((root / "formats").glob("*.json")) + sorted(
        p for p in (root / "capture_two_procs").rglob("*.json"))
    return [_seed(f"neuron-{p.parent.name}-{p.stem}"[:48], _load_json(p)) for p in files]


def device_profile_folders() -> list[Path]:
    return sorted(p for p in (TESTS / "fixtures" / "neuron" / "device_export").iterdir() if p.is_dir())


# ------------------------------------------------------------------------------------------ mutations


def _events(doc: Any) -> list[Any]:
    """The event list of any of the JSON formats (Chrome, Neuron JSON / Profiler 2.0 / NRT)."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("traceEvents", "trace_event", "trace_events", "events"):
            if isinstance(doc.get(key), list):
                return doc[key]  # type: ignore[no-any-return]
    return []


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _rng(*parts: object) -> random.Random:
    key = "/".join(str(p) for p in (CORPUS_SEED, *parts))
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


def truncations(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    raw = seed.raw
    for _ in range(4):
        yield raw[: rng.randrange(1, max(2, len(raw)))]
    yield raw[:-1]


def byte_flips(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    for _ in range(4):
        b = bytearray(seed.raw)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] = rng.choice((b[i] ^ (1 << rng.randrange(8)), rng.randrange(256)))
        yield bytes(b)


def bracket_edits(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    raw = seed.raw
    spots = [i for i, c in enumerate(raw) if c in b"[]{}"]
    for _ in range(4):
        i = rng.choice(spots)
        op = rng.randrange(3)
        if op == 0:
            yield raw[:i] + raw[i + 1:]  # delete one
        elif op == 1:
            yield raw[:i] + rng.choice((b"[", b"]", b"{", b"}")) + raw[i:]  # insert one
        else:
            yield raw[:i] + {ord("["): b"{", ord("]"): b"}", ord("{"): b"[", ord("}"): b"]"}[raw[i]] + raw[i + 1:]
    yield raw + b"]"  # trailing garbage
    yield raw.replace(b"]", b",]", 1)  # trailing comma


SWAP_FIELDS = ("ts", "dur", "pid", "tid", "name", "args", "ph", "id", "cat", "s", "bp", "timestamp", "duration")
SWAP_VALUES: tuple[Any, ...] = ("12", "x", "", None, True, [], [1, 2], {}, {"a": 1}, 1.5, -1, 0, 2**63, "1e3",
                                "<script>alert(1)</script>")


def type_swaps(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    events = _events(seed.doc)
    if not events:
        return
    for _ in range(6):
        doc = copy.deepcopy(seed.doc)
        evs = _events(doc)
        for _ in range(rng.randint(1, 3)):
            ev = rng.choice(evs)
            if isinstance(ev, dict):
                keys = [k for k in ev if k in SWAP_FIELDS] or list(ev) or ["ts"]
                ev[rng.choice(keys)] = rng.choice(SWAP_VALUES)
        yield _dump(doc)
    doc = copy.deepcopy(seed.doc)  # an event that is not an object
    _events(doc)[rng.randrange(len(_events(doc)))] = rng.choice((1, "event", None, [1]))
    yield _dump(doc)


EXTREMES = (b"1e999", b"-1e999", b"-0", b"-0.0", str(2**64).encode(), str(-(2**63) - 1).encode(), b"NaN",
            b"Infinity", b"-Infinity", b'"NaN"', b"1e-999", b"0.0000001", b"9" * 400, b"1.5e308", b"-1")


def extreme_numbers(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    """Number texts json.dumps cannot write, spliced into the raw bytes at a ts/dur/pid/tid value."""
    raw = seed.raw
    spots = [i for key in (b'"ts":', b'"dur":', b'"pid":', b'"tid":', b'"timestamp":', b'"duration":')
             for i in _find_all(raw, key)]
    if not spots:
        return
    for value in rng.sample(EXTREMES, 8):
        i = rng.choice(spots)
        start = raw.index(b":", i) + 1
        end = start
        while end < len(raw) and raw[end] not in b",}]":
            end += 1
        yield raw[:start] + value + raw[end:]


def _find_all(data: bytes, needle: bytes) -> list[int]:
    out, i = [], data.find(needle)
    while i >= 0 and len(out) < 5000:
        out.append(i)
        i = data.find(needle, i + 1)
    return out


def _with_event(seed: Seed, make: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """The seed with one more event derived from its first object event."""
    doc = copy.deepcopy(seed.doc)
    evs = _events(doc)
    base = next((e for e in evs if isinstance(e, dict) and e.get("ph") == "X"),
                next((e for e in evs if isinstance(e, dict)), {"ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1}))
    evs.append(make(dict(base)))
    return _dump(doc)


def structure(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    """Deep nesting, long strings, many threads, odd text."""
    depth = rng.choice((1000, 20_000, 200_000))
    nest = b"[" * depth + b"]" * depth
    key = b'"args":{'
    i = seed.raw.find(key)
    if i >= 0:
        yield seed.raw[: i + len(key)] + b'"deep":' + nest + b"," + seed.raw[i + len(key):]
    yield nest  # a top-level array of arrays
    yield b'{"traceEvents":' + b"[" * depth + b"]" * depth + b"}"
    yield b'{"traceEvents":[' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"]}"
    for text in ("<script>alert(1)</script>", "\u202eevil\u202c", "\U0001f525" * 50, "a\u0000b", "\\ud800",
                 "é" * 1000, "\u2028\u2029", ""):
        yield _with_event(seed, lambda e, t=text: {**e, "name": t, "cat": t, "args": {t: t}})
    yield _with_event(seed, lambda e: {**e, "name": "x" * (rng.randrange(1000, 100_000))})
    yield seed.raw.replace(b'"name":"', b'"name":"\\ud800\\udfff\\udc00', 50)  # lone surrogates escaped
    yield seed.raw.replace(b'"name":"', b'"name":"\xff\xfe', 3)  # invalid UTF-8 bytes


def encodings(seed: Seed, rng: random.Random) -> Iterator[bytes]:
    text = seed.raw.decode()
    yield b"\xef\xbb\xbf" + seed.raw
    yield b"\xef\xbb\xbf\xef\xbb\xbf" + seed.raw
    yield text.encode("utf-16")  # with BOM
    yield text.encode("utf-16-le")
    yield text.encode("utf-16-be")
    yield text.encode("utf-32")
    yield b"   \n\t" + seed.raw + b"\n\n   "
    yield seed.raw.replace(b"{", b"\x00{", 1)


JSON_CLASSES: dict[str, Callable[[Seed, random.Random], Iterator[bytes]]] = {
    "truncate": truncations,
    "byte_flip": byte_flips,
    "bracket": bracket_edits,
    "type_swap": type_swaps,
    "extreme_number": extreme_numbers,
    "structure": structure,
    "encoding": encodings,
}


def big_inputs(seed: Seed) -> Iterator[tuple[str, bytes]]:
    """Once per corpus, not per seed: a 10 MB name and 20,000 threads (each costs a full parse)."""
    yield "long_string", _with_event(seed, lambda e: {**e, "name": "n" * LONG_STRING})
    yield "long_string", _with_event(seed, lambda e: {**e, "args": {"k": "v" * LONG_STRING}})
    events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1, "pid": i % 7, "tid": i} for i in range(20_000)]
    yield "many_tids", _dump({"traceEvents": events})
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": f"t{i}"}} for i in range(20_000)]
    yield "many_tids", _dump({"traceEvents": events + [{"ph": "X", "name": "a", "ts": 0, "dur": 1, "pid": 1, "tid": 3}]})
    yield "many_tids", _dump({"traceEvents": [{"ph": "B", "name": "b", "ts": i, "pid": 1, "tid": 1}
                                              for i in range(20_000)]})  # 20,000 unclosed B


# ------------------------------------------------------------------------------------------- archives


def _zip(members: list[tuple[str, bytes]], link: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, FIXED_TIME), data, zipfile.ZIP_DEFLATED)
        if link is not None:
            info = zipfile.ZipInfo("link.json")
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, link)
    return buf.getvalue()


def _tar(members: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                t.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                t.addfile(info, io.BytesIO(m[1]))
    return gzip.compress(buf.getvalue(), mtime=0) if mode == "w:gz" else buf.getvalue()


def _tar_special(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _bomb(n: int, byte: bytes = b"0") -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    chunk = byte * 2**20
    return b"".join([*(c.compress(chunk) for _ in range(n // 2**20)), c.flush()])


def archives(seed: Seed) -> Iterator[tuple[str, bytes]]:
    """(file name, bytes): gzip/zip/tar wrappers around a good trace, with hostile members."""
    good = seed.raw
    gz = gzip.compress(good, mtime=0)
    yield "t.json.gz", gz
    yield "t.json.gz", gz[: len(gz) // 2]  # truncated stream
    yield "t.json.gz", gz + b"garbage after the stream"
    yield "t.json.gz", gz[:10] + bytes(b ^ 0x55 for b in gz[10:40]) + gz[40:]  # corrupt deflate data
    yield "t.json.gz", gzip.compress(gz, mtime=0)  # gzip in gzip
    yield "t.json.gz", gzip.compress(b"", mtime=0)
    yield "t.json.gz", b"\x1f\x8b"  # magic only
    yield "z.zip", _zip([("trace.json", good)])
    yield "z.zip", _zip([("../escape.json", good)])
    yield "z.zip", _zip([("/abs/trace.json", good)])
    yield "z.zip", _zip([("ok.json", good)], link="../../etc/passwd")
    yield "z.zip", _zip([("a/b/../../../up.json", good), ("fine.json", good)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name, which is the point
        yield "z.zip", _zip([("same.json", good), ("same.json", b"{")])
    yield "z.zip", _zip([("inner.zip", _zip([("trace.json", good)]))])
    yield "z.zip", _zip([(f"m{i}.json", b"{}") for i in range(300)])
    yield "z.zip", _zip([])
    yield "z.zip", _zip([("trace.json", good)])[:-30]  # cut central directory
    yield "z.zip", _zip([("<script>alert(1)</script>.json", good)])
    yield "t.tar", _tar([("trace.json", good)])
    yield "t.tar", _tar([("../../escape.json", good)])
    yield "t.tar", _tar([("/etc/trace.json", good)])
    yield "t.tar", _tar([_tar_special("link.json", tarfile.SYMTYPE, "/etc/passwd"), ("ok.json", good)])
    yield "t.tar", _tar([_tar_special("hard.json", tarfile.LNKTYPE, "../../etc/passwd")])
    yield "t.tar", _tar([_tar_special("dev", tarfile.CHRTYPE), _tar_special("fifo", tarfile.FIFOTYPE)])
    yield "t.tar", _tar([_tar_special("dir/", tarfile.DIRTYPE), ("dir/trace.json", good)])
    yield "t.tar.gz", _tar([("trace.json", good)], "w:gz")
    yield "t.tar.gz", _tar([("trace.json", good)], "w:gz")[:-100]
    yield "t.tar", _tar([("trace.json", good)])[:700]  # cut inside a member


def bombs() -> Iterator[tuple[str, bytes]]:
    """Once per corpus: 200 MB of one byte in a few hundred KB, refused by ratio."""
    yield "bomb.json.gz", _bomb(200 * 2**20)
    yield "bomb.json.gz", _bomb(200 * 2**20, b" ")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z, z.open(zipfile.ZipInfo("bomb.json", FIXED_TIME), "w") as f:
        for _ in range(200):
            f.write(b"0" * 2**20)
    yield "bomb.zip", buf.getvalue()


# -------------------------------------------------------------------------------------------- parquet


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def parquet_mutations(folder: Path, tables_max: int | None) -> Iterator[tuple[str, dict[str, bytes]]]:
    """A Neuron device-profile export folder with one table mutated: dropped column, a column of the wrong
    type, no rows, garbage or cut bytes, all columns null."""
    files = {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}
    rng = _rng("parquet", folder.name)
    top = f"{folder.name}"
    for tname in _spread(sorted(files), tables_max):
        table = pq.read_table(io.BytesIO(files[tname]))
        col = rng.choice(table.column_names)
        variants: dict[str, bytes] = {
            "drop_column": _parquet(table.drop_columns([col])),
            "empty_table": _parquet(table.slice(0, 0)),
            "wrong_type": _parquet(table.set_column(table.column_names.index(col), col,
                                                    pa.array([f"x{i}" for i in range(table.num_rows)]))),
            "null_column": _parquet(table.set_column(table.column_names.index(col), col,
                                                     pa.nulls(table.num_rows, table.schema.field(col).type))),
            "garbage": b"PAR1" + bytes(rng.randrange(256) for _ in range(200)) + b"PAR1",
            "truncated": files[tname][: len(files[tname]) // 2],
        }
        for how, data in variants.items():
            yield how, {f"{top}/{n}": (data if n == tname else b) for n, b in files.items()}


# ---------------------------------------------------------------------------------------------- corpus


CI_SEEDS = 9  # Chrome seeds in the CI corpus (spread evenly over the sorted real traces)
CI_TABLES = 4  # mutated tables per device profile in the CI corpus


def _spread(items: list[Any], n: int | None) -> list[Any]:
    if n is None or len(items) <= n:
        return items
    return [items[i * len(items) // n] for i in range(n)]


def build_corpus(shared: Path = SHARED_TRACES, seeds_max: int | None = CI_SEEDS,
                 tables_max: int | None = CI_TABLES) -> list[FuzzInput]:
    """The corpus, in a fixed order, names unique. The defaults give the CI corpus (about 1,000 inputs);
    None takes every seed and table (bench/fuzz.py)."""
    out: list[FuzzInput] = []

    def add(kind: str, seed: str, files: dict[str, bytes], is_json: bool) -> None:
        out.append(FuzzInput(f"{kind}/{seed}/{sum(1 for f in out if f.kind == kind)}", kind, files, is_json))

    seeds = chrome_seeds(shared, seeds_max)
    for seed in seeds + neuron_json_seeds():
        for kind, mutate in JSON_CLASSES.items():
            for data in mutate(seed, _rng(seed.name, kind)):
                add(kind, seed.name, {f"{seed.name}.json": data}, True)
    largest = max(seeds, key=lambda s: len(s.raw))
    for kind, data in big_inputs(largest):
        add(kind, largest.name, {"big.json": data}, True)
    for seed in seeds[:: max(1, len(seeds) // 4)][:4]:
        for name, data in archives(seed):
            add("archive", seed.name, {name: data}, False)
    for name, data in bombs():
        add("archive_bomb", "zeros", {name: data}, False)
    for folder in device_profile_folders():
        for how, files in parquet_mutations(folder, tables_max):
            add(f"parquet_{how}", folder.name, files, False)
    if shared.is_dir():  # the deliberately broken real files, as they are
        for path in sorted((shared / "speedscope").rglob("*partial*.json")):
            add("real_broken", path.stem, {path.name: path.read_bytes()}, True)
    return out


def corpus_digest(corpus: list[FuzzInput]) -> str:
    h = hashlib.sha256()
    for f in corpus:
        h.update(f.name.encode())
        for rel, data in f.files.items():
            h.update(rel.encode() + hashlib.sha256(data).digest())
    return h.hexdigest()

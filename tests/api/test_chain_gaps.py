"""The linked chain's gaps when an op launches twice and the GPU runs behind: each link's gap is from the
link it follows (launch <- its op, execution <- its launch), so none is negative; the old start-to-start gap
between the first kernel and the second launch was (launch 2 - kernel 1) < 0, shown as "-80 µs"."""

from __future__ import annotations

import json
from decimal import Decimal

from fastapi.testclient import TestClient

from tests.api.conftest import Uploader

BASE_NS = 1_700_000_000_000_000_000
# (name, cat, pid, tid, ts µs, dur µs, args): kernel 1 starts after launch 2, a device queue
EVENTS = [
    ("aten::mm", "cpu_op", 1, 1, "5.000", "40.000", {"External id": 1}),
    ("cudaLaunchKernel", "cuda_runtime", 1, 1, "10.250", "3.000", {"External id": 1, "correlation": 11}),
    ("cudaLaunchKernel", "cuda_runtime", 1, 1, "20.500", "3.000", {"External id": 1, "correlation": 12}),
    ("mm_kernel_a", "kernel", 0, 7, "100.125", "12.000", {"correlation": 11}),
    ("mm_kernel_b", "kernel", 0, 7, "115.000", "9.000", {"correlation": 12}),
]


def trace_text() -> str:
    events = [{"ph": "X", "name": n, "cat": c, "pid": p, "tid": t, "ts": f"@{ts}@", "dur": f"@{d}@", "args": a}
              for n, c, p, t, ts, d, a in EVENTS]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "deviceProperties": [{"id": 0, "name": "Fake GPU"}],
           "traceEvents": events}
    return json.dumps(doc).replace('"@', "").replace('@"', "")  # ts/dur as the decimal numbers written above


def start_ns(i: int) -> int:
    return int(Decimal(EVENTS[i][4]) * 1000)


def test_second_launch_gap_is_from_its_op_not_from_the_first_kernel(client: TestClient, upload: Uploader) -> None:
    run = upload(files=[("queued.json", trace_text().encode())])
    assert run["status"] == "ready", run
    rid = run["id"]
    ops = client.get(f"/api/runs/{rid}/search", params={"q": "aten::mm"}).json()["matches"]
    body = client.get(f"/api/runs/{rid}/events/{ops[0]['slice_id']}").json()
    chain = body["chain"]
    by_id = {c["slice_id"]: c for c in chain}
    got = [(c["name"], c["relation"], by_id[c["after"]]["name"] if c["after"] is not None else None, c["gap_ns"])
           for c in chain]
    assert got == [
        ("aten::mm", "self", None, None),
        ("cudaLaunchKernel", "launch", "aten::mm", start_ns(1) - start_ns(0)),
        ("mm_kernel_a", "execute", "cudaLaunchKernel", start_ns(3) - start_ns(1)),
        ("cudaLaunchKernel", "launch", "aten::mm", start_ns(2) - start_ns(0)),
        ("mm_kernel_b", "execute", "cudaLaunchKernel", start_ns(4) - start_ns(2)),
    ]
    assert by_id[chain[4]["after"]]["ts_rel_ns"] == start_ns(2) - start_ns(0)  # kernel b follows launch 2
    assert start_ns(2) - start_ns(3) < 0  # what the list order alone would have shown
    assert all(c["gap_ns"] >= 0 for c in chain[1:])

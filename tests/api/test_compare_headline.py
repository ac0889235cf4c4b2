"""The compare headline (issue 34 point 7): the median step when both runs have steps, else the span, with
summed device time only as a second figure; host-bound runs said so; each run's device model shown; a
warning when devices, world sizes or step counts differ. Two constructed runs of "one model on two GPUs":
run B has the faster median step but more summed device time. Every expected number is read from the
trace JSON here (Decimal µs -> ns), not from the code under test."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import Uploader

BASE_NS = 1_700_000_000_000_000_000
A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"


def trace(steps_us: list[int], kernels_us: list[int], device: str, world: int = 1) -> bytes:
    """One rank: back-to-back ProfilerStep#N of `steps_us`, each launching kernels of `kernels_us` (one
    after another on stream 7, 20 µs after the step starts): a host-bound loop (the device mostly idle)."""
    ev: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
                                {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]
    t, corr = 0, 0
    for n, step in enumerate(steps_us):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                   "ts": f"{t}.000", "dur": f"{step}.000", "args": {}})
        k0 = t + 20
        for dur in kernels_us:
            corr += 1
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": f"{k0 - 10}.000",
                       "dur": "8.000", "args": {"External id": corr}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": f"{k0 - 8}.000", "dur": "4.000", "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": f"{k0}.000",
                       "dur": f"{dur}.000", "args": {"correlation": corr, "device": 0, "stream": 7}})
            k0 += dur + 5
        t += step
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS, "deviceProperties": [{"id": 0, "name": device}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world}, "traceEvents": ev}
    return json.dumps(doc).encode()


def truth(data: bytes) -> dict[str, Any]:
    """From the file alone: the lower-median step, summed kernel time, span and device busy %."""
    doc = json.loads(data, parse_float=Decimal)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
    steps = sorted(ns(e["dur"]) for e in xs if e["name"].startswith("ProfilerStep#"))
    kernels = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in xs if e["cat"] == "kernel"]
    span = max(ns(e["ts"]) + ns(e["dur"]) for e in xs) - min(ns(e["ts"]) for e in xs)
    assert all(a[1] <= b[0] for a, b in zip(sorted(kernels), sorted(kernels)[1:], strict=False))  # no overlap
    device = sum(e - s for s, e in kernels)
    return {"step_ns": steps[(len(steps) - 1) // 2] if steps else None, "steps": len(steps), "device_ns": device, "span_ns": span,
            "busy_pct": 100 * device / span, "devices": [d["name"] for d in doc["deviceProperties"]]}


RUN_A = trace([1000, 1100, 1050], [100], A100)  # A100: median step 1.05 ms, 300 µs of kernels
RUN_B = trace([900, 950, 1000], [70, 70], H100)  # H100: median step 0.95 ms, 420 µs of kernels


def test_faster_step_wins_the_headline_over_more_device_time(client: TestClient, upload: Uploader) -> None:
    a = upload(files=[("a100.json", RUN_A)], name="on A100")["id"]
    b = upload(files=[("h100.json", RUN_B)], name="on H100")["id"]
    ta, tb = truth(RUN_A), truth(RUN_B)
    assert tb["step_ns"] < ta["step_ns"] and tb["device_ns"] > ta["device_ns"]  # the shape of the issue
    body = client.get(f"/api/compare?runs={a},{b}").json()
    h = body["headline"]
    assert h["metric"] == "step_ns" and h["totals_ns"] == [ta["step_ns"], tb["step_ns"]] == [1_050_000, 950_000]
    assert h["deltas_ns"] == [0, -100_000] and h["pct_change"][1] == 100 * (950_000 - 1_050_000) / 1_050_000
    second = h["secondary"]
    assert second["metric"] == "device_total_ns" and second["totals_ns"] == [ta["device_ns"], tb["device_ns"]]
    assert second["pct_change"][1] == 100 * (tb["device_ns"] - ta["device_ns"]) / ta["device_ns"] == 40.0
    assert [round(p, 6) for p in h["busy_pct"]] == [round(ta["busy_pct"], 6), round(tb["busy_pct"], 6)]
    assert h["host_bound"] == [True, True]
    assert [r["devices"] for r in body["runs"]] == [[{"name": A100, "count": 1, "source": "deviceProperties"}],
                                                    [{"name": H100, "count": 1, "source": "deviceProperties"}]]
    assert [w["code"] for w in body["warnings"]] == ["devices"]
    assert A100 in body["warnings"][0]["message"] and H100 in body["warnings"][0]["message"]

    html = client.get(f"/compare?runs={a},{b}").text
    head = html[html.index('id="headline"'):html.index('id="baseline-note"')]
    assert "Median step time" in head and 'class="verdict delta-neg">faster<' in head
    assert "-9.5 %" in head and "+40.0 %" in head  # the step's change is the headline, device time's second
    assert head.index("-9.5 %") < head.index("+40.0 %")
    assert A100 in head and H100 in head and head.count(">host-bound<") == 2 and 'id="host-bound-note"' in head
    assert 'id="compare-warnings"' in head and "different devices" in head


def test_unlike_world_sizes_and_step_counts_are_warned(client: TestClient, upload: Uploader) -> None:
    a = upload(files=[("a.json", RUN_A)], name="one rank")["id"]
    b = upload(files=[("b.json", trace([900, 950, 1000, 990], [70], A100, world=2))], name="two ranks")["id"]
    body = client.get(f"/api/compare?runs={a},{b}").json()
    assert [w["code"] for w in body["warnings"]] == ["world_size", "step_count"]
    assert [r["world_size"] for r in body["runs"]] == [1, 2] and [r["step_count"] for r in body["runs"]] == [3, 4]
    assert body["headline"]["metric"] == "step_ns"


def test_without_steps_the_headline_is_the_span(client: TestClient, upload: Uploader) -> None:
    no_steps = [json.loads(RUN_A), json.loads(RUN_B)]
    for doc in no_steps:
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not e.get("name", "").startswith("ProfilerStep")]
    files = [json.dumps(d).encode() for d in no_steps]
    a = upload(files=[("a.json", files[0])], name="a")["id"]
    b = upload(files=[("b.json", files[1])], name="b")["id"]
    h = client.get(f"/api/compare?runs={a},{b}").json()["headline"]
    assert h["metric"] == "span_ns" and h["totals_ns"] == [truth(f)["span_ns"] for f in files]
    assert h["secondary"]["metric"] == "device_total_ns"
    html = client.get(f"/compare?runs={a},{b}").text
    assert "Span (wall time" in html and "not every run has steps" in html

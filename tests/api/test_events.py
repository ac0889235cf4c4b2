"""Event details: fields and args, parents, children, the linked chain across lanes with gaps."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import assert_error


def test_op_event_has_args_parents_children_and_chain(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/events/3").json()  # aten::mul
    ev = body["event"]
    assert ev["name"] == "aten::mul" and ev["lane"] == "framework" and ev["ts_rel_ns"] == 400_000
    assert ev["ts_ns"] == 1_700_000_000_000_400_000 and ev["args"]["note"] == "<script>alert(1)</script>"
    assert [p["name"] for p in body["parents"]] == ["ProfilerStep#1"]
    assert body["children"]["count"] == 1 and body["children"]["top"][0]["name"] == "cudaLaunchKernel"
    chain = [(c["name"], c["relation"], c["gap_ns"]) for c in body["chain"]]
    assert chain == [("aten::mul", "self", None), ("cudaLaunchKernel", "launch", 10_000),
                     ("mul_kernel", "execute", 290_000)]


def test_kernel_chain_runs_upstream(client: TestClient, run_id: str) -> None:
    chain = client.get(f"/api/runs/{run_id}/events/9").json()["chain"]  # gemm_kernel
    assert [(c["name"], c["lane"], c["relation"]) for c in chain] == [
        ("aten::addmm", "framework", "op"), ("cudaLaunchKernel", "runtime", "launch"),
        ("gemm_kernel", "hardware", "self")]


def test_outer_op_chain_includes_nested_launches(client: TestClient, run_id: str) -> None:
    chain = client.get(f"/api/runs/{run_id}/events/1").json()["chain"]  # aten::linear > aten::addmm
    assert [c["relation"] for c in chain] == ["self", "launch", "execute"]


def test_runtime_call_chain(client: TestClient, run_id: str) -> None:
    chain = client.get(f"/api/runs/{run_id}/events/8").json()["chain"]
    assert [(c["name"], c["relation"]) for c in chain] == [
        ("aten::add", "op"), ("cudaLaunchKernel", "self"), ("add_kernel", "execute")]


def test_unknown_event_is_404(client: TestClient, run_id: str) -> None:
    assert_error(client.get(f"/api/runs/{run_id}/events/999"), 404, "event_not_found")
    assert_error(client.get(f"/api/runs/{run_id}/events/-1"), 404, "event_not_found")
    assert_error(client.get(f"/api/runs/{run_id}/events/x"), 422, "validation")

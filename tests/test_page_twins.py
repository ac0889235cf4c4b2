"""Compute once, render twice, for every page: each page's context holds exactly what its JSON twin
returns (one builder per page, one module per page family in explorer.views), host-only runs included; where the page and the API
had two copies of a rule, the API's rule is pinned here."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import explorer.views
import explorer.views.advice
import explorer.views.compare
import explorer.views.device
import explorer.views.device_chain
import explorer.views.device_side
from api.app import create_app
from bench.synth_ranks import RankPlan, write_rank_traces
from explorer.config import PROJECT_ROOT, Settings
from explorer.runs.ingest import ingest_paths
from explorer.views.advice import AdvicePage
from explorer.views.collectives import CollectivesPage
from explorer.views.compare import ComparePage
from explorer.views.device import DeviceComparePage, DevicePage
from explorer.views.device_chain import DeviceChainPage
from explorer.views.device_side import DeviceSidePage
from explorer.views.fleet import FleetPage
from explorer.views.kernels import KernelsPage
from explorer.views.memory import MemoryPage
from explorer.views.ops import OpsPage
from explorer.views.overview import OverviewPage
from explorer.views.ranks import RankComparePage, RanksPage
from explorer.views.runs import NotReadyPage, RunsPage
from explorer.views.sql import SqlPage
from explorer.views.steps import StepsPage
from explorer.views.timeline import TimelinePage
from tests.helpers.kernel_trace import write_kernel_trace
from tests.helpers.memory_profiles import write_rank_memory_traces

FRAMES = PROJECT_ROOT / "tests" / "fixtures" / "kineto_recursive_frames.json"
DEVICE_EXPORT = PROJECT_ROOT / "tests" / "fixtures" / "neuron" / "device_export"  # two Neuron device profiles


def host_trace(path: Path, scale: int) -> Path:
    """Host-only ops on two threads, nested two deep, at µs times with three decimals (no device)."""
    events = []
    for tid in (1, 2):
        for i in range(6):
            t0 = Decimal(i * 100 * scale) + Decimal("0.125") * tid
            outer = {"ph": "X", "cat": "cpu_op", "name": f"aten::outer{i % 3}", "pid": 7, "tid": tid,
                     "ts": t0, "dur": Decimal(60 * scale) + Decimal("0.375")}
            inner = {"ph": "X", "cat": "cpu_op", "name": f"aten::inner{i % 2}", "pid": 7, "tid": tid,
                     "ts": t0 + Decimal("10.5"), "dur": Decimal(20 * scale) + Decimal("0.001"),
                     "args": {"Input Dims": [[i + 1, 4]]}}
            events += [outer, inner]
    text = json.dumps({"traceEvents": events}, default=lambda d: f"@{d}@")
    path.write_text(text.replace('"@', "").replace('@"', ""))  # decimals as JSON numbers, digits kept
    return path


def file_self_cpu_total_ns(path: Path) -> int:
    """Summed self CPU of a host-only file's ops, independently: per thread, the union of the op intervals
    (nested ops' self times add up to it), in exact decimal µs."""
    events = json.loads(path.read_text(), parse_float=Decimal)["traceEvents"]
    total = Decimal(0)
    for tid in {e["tid"] for e in events}:
        spans = sorted((Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(e["dur"])) for e in events if e["tid"] == tid)
        end = None
        for a, b in spans:
            if end is None or a > end:
                total += b - a
                end = b
            elif b > end:
                total += b - end
                end = b
    ns = total * 1000
    assert ns == ns.to_integral_value()
    return int(ns)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str], dict[str, Path]]]:
    tmp = tmp_path_factory.mktemp("twins")
    files = {"gpu": write_kernel_trace(tmp / "gpu.json"), "host1": host_trace(tmp / "host1.json", 1),
             "host2": host_trace(tmp / "host2.json", 2), "frames": FRAMES, "neuron": DEVICE_EXPORT}
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    runs = {name: ingest_paths(store, [path], name).id for name, path in files.items()}
    rank_files = write_rank_traces(tmp / "ranks", RankPlan(world=4, steps=3, units=4, late_rank=2, late_ns=5_000_000))
    runs["ranks"] = ingest_paths(store, rank_files, "ranks").id
    runs["memranks"] = ingest_paths(store, write_rank_memory_traces(tmp / "memranks"), "memranks").id
    files["ranks"] = rank_files[0].parent
    with TestClient(app) as client:
        yield client, runs, files


def twin_data(page: Any) -> dict[str, Any]:
    """What of a page context its JSON twin returns, by page type (every page type is listed)."""
    if isinstance(page, RunsPage):
        return {"runs": page.runs, "total": page.total}
    if isinstance(page, OverviewPage | NotReadyPage | TimelinePage):
        return dict(page.run)
    if isinstance(page, OpsPage):
        return {"rows": page.rows, "device_total_ns": page.device_total_ns, "attributed_ns": page.attributed_ns,
                "view": page.view, "sort": page.sort, "has_modules": page.has_modules, "rates": page.rates} | (
            {"memory": page.memory} if page.memory is not None else {})
    if isinstance(page, KernelsPage):
        return {"rows": page.rows, "device_total_ns": page.device_total_ns, "categories": page.categories,
                "rates": page.rates}
    if isinstance(page, ComparePage | DeviceComparePage | DeviceSidePage):
        return dict(page.compare)
    if isinstance(page, DevicePage):
        return dict(page.view)
    if isinstance(page, DeviceChainPage):
        return dict(page.chain)
    if isinstance(page, StepsPage):
        return dict(page.steps)
    if isinstance(page, CollectivesPage):
        return dict(page.data)
    if isinstance(page, MemoryPage):
        return dict(page.memory)
    if isinstance(page, SqlPage):  # the schema; the query's result is the page's script's to fetch
        return dict(page.schema)
    if isinstance(page, AdvicePage):
        return dict(page.advice)
    if isinstance(page, RanksPage):
        return dict(page.ranks)
    if isinstance(page, RankComparePage):
        return dict(page.result)
    if isinstance(page, FleetPage):
        return dict(page.fleet)
    raise AssertionError(f"no twin rule for {type(page).__name__}")


PAGES = ["/", "/?name=host", "/runs/{gpu}", "/runs/{host1}", "/runs/{gpu}/timeline", "/runs/{host1}/timeline",
         "/runs/{gpu}/ops", "/runs/{host1}/ops", "/runs/{host1}/ops?by_shape=1&sort=calls",
         "/runs/{frames}/ops?view=python&by_module=1", "/runs/{frames}/ops?view=all&q=aten",
         "/runs/{host1}/ops?by_module=1", "/runs/{gpu}/kernels", "/runs/{gpu}/kernels?category=memcpy%20HtoD",
         "/runs/{gpu}/kernels?sort=%2Bname&limit=3", "/runs/{host1}/kernels",
         "/compare?runs={host1},{host2}", "/compare?runs={host2},{host1}&baseline={host1}",
         "/compare?runs={gpu},{host1}", "/compare?runs={gpu},{host1},{host2}",
         "/runs/{neuron}/device/matmul", "/runs/{neuron}/device/rmsnorm_naive",
         "/runs/{neuron}/device/matmul?start_ns=90000&end_ns=100000",
         "/device/compare?a={neuron}:rmsnorm_naive&b={neuron}:matmul",
         "/device/side-by-side?p={neuron}:rmsnorm_naive&p={neuron}:matmul", "/device/side-by-side?runs={neuron}",
         "/runs/{neuron}/device/matmul/chain?node=Instruction:3&mode=trace",
         "/runs/{gpu}/steps", "/runs/{gpu}/steps?annotation=aten%3A%3Amul", "/runs/{host1}/steps",
         "/runs/{gpu}/sql", "/runs/{host1}/sql?q=select%201",
         "/runs/{gpu}/collectives", "/runs/{gpu}/collectives?sort=%2Bseq&limit=1", "/runs/{host1}/collectives",
         "/runs/{gpu}/memory", "/runs/{host1}/memory",
         "/runs/{gpu}/advice", "/runs/{host1}/advice", "/runs/{neuron}/advice",
         "/runs/{ranks}/ranks", "/runs/{ranks}/ranks/compare", "/runs/{ranks}/ranks/compare?a=0&b=1",
         "/runs/{ranks}/collectives", "/runs/{ranks}/steps", "/runs/{ranks}/ops?rank=2", "/runs/{ranks}/kernels?rank=0,2",
         "/runs/{ranks}", "/runs/{ranks}?rank=1", "/runs/{gpu}/ops?start_ns=0&end_ns=50000",
         "/runs/{memranks}/ops?rank=1&memory_device=CPU&sort=-self_peak_bytes",
         "/runs/{memranks}/ops?memory_device=CUDA%200%20(rank%200)&start_ns=100000&end_ns=600000",
         "/fleet", "/fleet?kind=kernel", "/fleet?name=aten%3A%3Aouter0&run_name=host"]


def page_and_twin(client: TestClient, path: str) -> tuple[Any, dict[str, Any]]:
    resp = client.get(path)
    assert resp.status_code == 200, resp.text[:300]
    page = resp.context["page"]  # type: ignore[attr-defined]
    assert page.twin and f'href="{page.twin.replace("&", "&amp;")}"' in resp.text  # every page links its twin
    twin = client.get(page.twin)
    assert twin.status_code == 200, twin.text[:300]
    return page, twin.json()


@pytest.mark.parametrize("path", PAGES)
def test_every_page_context_equals_its_json_twin(served: tuple[TestClient, dict[str, str], dict[str, Path]],
                                                 path: str) -> None:
    client, runs, _ = served
    page, twin = page_and_twin(client, path.format(**runs))
    data = twin_data(page)
    if isinstance(page, TimelinePage):  # twin: the run; the canvas's first window spans the whole run
        assert data == client.get(f"/api/runs/{page.run['id']}").json()
        assert twin["end_ns"] == max(page.span_ns, 1) == max(data["summary"]["span_ns"], 1)
    else:
        assert data == {k: twin[k] for k in data}
        assert set(data) == set(twin) - ({"limit", "offset"} if isinstance(page, RunsPage) else set())


def test_the_table_covers_every_page_type(served: tuple[TestClient, dict[str, str], dict[str, Path]]) -> None:
    client, runs, _ = served
    views = [importlib.import_module(f"explorer.views.{m.name}") for m in pkgutil.iter_modules(explorer.views.__path__)]
    page_types = {cls for module in views for cls in vars(module).values()
                  if dataclasses.is_dataclass(cls) and "twin" in {f.name for f in dataclasses.fields(cls)}}
    seen = {type(page_and_twin(client, path.format(**runs))[0]) for path in PAGES}
    pending = client.app.state.explorer.store.catalog.create("pending")  # type: ignore[attr-defined]
    seen.add(type(page_and_twin(client, f"/runs/{pending.id}/ops")[0]))
    assert page_types == seen


def test_host_only_compare_headline_is_cpu_time_on_page_and_api(
        served: tuple[TestClient, dict[str, str], dict[str, Path]]) -> None:
    client, runs, files = served
    page, twin = page_and_twin(client, f"/compare?runs={runs['host1']},{runs['host2']}")
    truth = [file_self_cpu_total_ns(files["host1"]), file_self_cpu_total_ns(files["host2"])]
    for headline in (page.headline, twin["headline"]):
        host = headline["secondary"]  # the headline is the step or span; host CPU time the second figure
        assert headline["metric"] in ("step_ns", "span_ns") and host["metric"] == "cpu_total_ns"
        assert host["totals_ns"] == truth
        assert host["deltas_ns"] == [0, truth[1] - truth[0]]
        assert headline["host_bound"] == [False, False] and headline["busy_pct"] == [None, None]  # no device
    assert [r["device_total_ns"] for r in twin["runs"]] == [0, 0]
    assert twin["sort"] == "self_cpu_ns"


def test_op_sort_direction_is_the_apis_rule(served: tuple[TestClient, dict[str, str], dict[str, Path]]) -> None:
    """A bare column sorts descending unless it is `name` (load_ops); the page's links used to treat
    input_shapes as text (ascending first): the API's rule wins."""
    client, runs, _ = served
    page, twin = page_and_twin(client, f"/runs/{runs['host1']}/ops?by_shape=1&sort=input_shapes")
    shapes = [r["input_shapes"] for r in twin["rows"]]
    assert len(set(shapes)) > 1 and shapes == sorted(shapes, reverse=True)
    assert page.descending and page.rows == twin["rows"]
    assert page.sort_link("input_shapes").startswith("?sort=%2Binput_shapes")  # the sorted column flips
    fresh, _ = page_and_twin(client, f"/runs/{runs['host1']}/ops?by_shape=1")
    assert fresh.sort_link("input_shapes").startswith("?sort=-input_shapes")
    assert fresh.sort_link("name").startswith("?sort=%2Bname")


def test_compare_run_limit_is_one_rule(served: tuple[TestClient, dict[str, str], dict[str, Path]]) -> None:
    client, runs, _ = served
    nine = ",".join([runs["host1"]] * 9)
    for path in (f"/compare?runs={nine}", f"/api/compare?runs={nine}", f"/compare?runs={runs['host1']}",
                 f"/api/compare?runs={runs['host1']}"):
        assert client.get(path).status_code == 400, path
    assert explorer.views.compare.MAX_COMPARE_RUNS == 8

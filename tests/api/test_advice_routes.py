"""The advisor where it shows: GET /api/runs/{id}/advice, the findings page, the overview's top findings, the
`trace-explorer advise` command (text, --json, --markdown) and Run.advice(); trace names stay text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import explorer.views.overview
from api.app import create_app
from explorer.analysis.advice.finding import AdviceBug
from explorer.cli import main
from explorer.config import Settings
from explorer.notebook import open_run
from explorer.runs.ingest import ingest_paths
from explorer.runs.run import Run
from explorer.views.advice import compute_run_advice
from tests.analysis.advice.builder import Op, build

HOSTILE = "<script>alert('advice')</script>"


def host_bound_trace(path: Path) -> Path:
    """A device waiting on host work named by hostile text, plus a pageable copy."""
    ops = [Op("aten::addmm", 5, [[64, 64]], 10, gap_before=300, busy_name=HOSTILE) for _ in range(5)]
    ops.append(Op("aten::copy_", 5, [[64]], 40, kernel_name="Memcpy HtoD (Pageable -> Device)"))
    return build(ops, path)


def test_api_page_and_overview_show_the_same_findings(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    run_id = ingest_paths(store, [host_bound_trace(tmp_path / "t.json")], "adv").id
    with TestClient(app) as client:
        api = client.get(f"/api/runs/{run_id}/advice")
        assert api.status_code == 200
        body = api.json()
        assert body == compute_run_advice(Run.of(store, run_id))
        assert [f["rule"] for f in body["findings"]] == ["host-bound", "pageable-copies"]
        page = client.get(f"/runs/{run_id}/advice")
        assert page.status_code == 200 and page.context["page"].advice == body  # type: ignore[attr-defined]
        assert HOSTILE not in page.text and "&lt;script&gt;" in page.text
        assert page.text.count('class="finding"') == 2 and 'id="tab-advice"' in page.text
        overview = client.get(f"/runs/{run_id}")
        assert overview.context["page"].findings == body["findings"][:3]  # type: ignore[attr-defined]
        assert 'id="overview-advice"' in overview.text and HOSTILE not in overview.text
        missing = client.get("/api/runs/nope/advice")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
    store.catalog.close()


def test_an_advisor_bug_leaves_the_overview_standing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that breaks on an unusual run must not take the overview down: the panel is left out (logged)."""
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    run_id = ingest_paths(store, [host_bound_trace(tmp_path / "t.json")], "adv").id

    def broken(run: Run) -> object:
        raise AdviceBug("a finding claims more than it acts on")

    monkeypatch.setattr(explorer.views.overview, "run_advice", broken)
    with TestClient(app) as client:
        overview = client.get(f"/runs/{run_id}")
        assert overview.status_code == 200 and 'id="overview-advice"' not in overview.text
        assert overview.context["page"].findings == []  # type: ignore[attr-defined]
    store.catalog.close()


def test_cli_advise_prints_text_json_and_markdown(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    runner = CliRunner()
    path = host_bound_trace(tmp_path / "t.json")
    assert runner.invoke(main, ["ingest", str(path), "--name", "adv [x]", "--data-dir", data]).exit_code == 0
    as_json = runner.invoke(main, ["advise", "adv [x]", "--json", "--data-dir", data])
    assert as_json.exit_code == 0, as_json.output
    advice = json.loads(as_json.stdout)
    run = open_run(advice["run_id"], data_dir=data)
    assert run.advice() == advice
    text = runner.invoke(main, ["advise", "adv [x]", "--data-dir", data]).stdout
    assert text.startswith("1. The device idles while the host is busy in " + HOSTILE)  # printed literally
    md = runner.invoke(main, ["advise", "adv [x]", "--markdown", "--data-dir", data]).stdout
    assert md.startswith("### Trace Explorer advice: adv \\[x\\]")
    assert "| 1 | The device idles while the host is busy in \\<script\\>alert('advice')\\</script\\> |" in md
    assert f"(/runs/{advice['run_id']}/timeline?start=" in md
    assert runner.invoke(main, ["advise", "no-such-run", "--data-dir", data]).exit_code == 2


def test_offline_report_names_the_findings_without_server_links(tmp_path: Path) -> None:
    from explorer.report.html import write_report
    from explorer.store.runs import RunStore

    store = RunStore(tmp_path / "data")
    run_id = ingest_paths(store, [host_bound_trace(tmp_path / "t.json")], "adv").id
    out = tmp_path / "report.html"
    write_report(Run.of(store, run_id), out)
    html = out.read_text()
    section = html.split('id="report-advice"', 1)[1].split("</section>", 1)[0]
    assert section.count('class="finding"') == 2 and "Pin host memory" in section
    assert "&lt;script&gt;" in section and HOSTILE not in html
    assert "href=" not in section  # a report file has no server to open the evidence in
    store.catalog.close()


def test_compare_says_which_findings_went_and_came(tmp_path: Path) -> None:
    from tests.analysis.advice.builder import rmsnorm_ops

    before = build([*rmsnorm_ops(20), Op("aten::addmm", 10, [[64, 2048]], 100)] * 2, tmp_path / "before.json")
    after = build([Op("aten::rms_norm", 10, [[64, 2048], [2048]], 25), Op("aten::addmm", 10, [[64, 2048]], 100),
                   Op("aten::copy_", 5, [[64]], 40, kernel_name="Memcpy HtoD (Pageable -> Device)")] * 2,
                  tmp_path / "after.json")
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    a, b = ingest_paths(store, [before], "before").id, ingest_paths(store, [after], "after").id
    with TestClient(app) as client:
        resp = client.get(f"/compare?runs={a},{b}&baseline={a}")
        assert resp.status_code == 200
        (change,) = resp.context["page"].findings  # type: ignore[attr-defined]
        assert change["run_id"] == b
        assert [f["rule"] for f in change["disappeared"]] == ["unfused-elementwise"]
        assert [f["rule"] for f in change["appeared"]] == ["pageable-copies"]
        assert 'id="compare-advice"' in resp.text and "gone: Fuse the hand-written RMSNorm" in resp.text
    store.catalog.close()


def test_findings_page_shows_gemm_efficiency_and_unknown_devices(tmp_path: Path) -> None:
    mm = [Op("aten::mm", 10, [[4096, 4096], [4096, 8192]], kernel=300, types=["c10::BFloat16"] * 2)] * 3
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    h100 = ingest_paths(store, [build(mm, tmp_path / "h.json", device="NVIDIA H100 80GB HBM3")], "h100").id
    v100 = ingest_paths(store, [build(mm, tmp_path / "v.json", device="Tesla V100-SXM2-32GB")], "v100").id
    with TestClient(app) as client:
        page = client.get(f"/runs/{h100}/advice").text
        table = page.split('id="efficiency"', 1)[1]
        assert "H100 SXM" in table and "NVIDIA H100 Tensor Core GPU datasheet" in table
        assert '<td class="num eff-pct">92.6 %</td>' in table  # 2·4096·8192·4096 FLOP / 300 µs / 989.5 TFLOP/s
        assert '<td class="num eff-tflops">916.26</td>' in table
        other = client.get(f"/runs/{v100}/advice").text.split('id="efficiency"', 1)[1]
        assert "unknown device “Tesla V100-SXM2-32GB”" in other and '<td class="num eff-pct">–</td>' in other
    store.catalog.close()


def test_neuron_recommendations_become_untimed_findings(tmp_path: Path) -> None:
    """Every recommendation a device profile's summary lists is one `neuron:` finding, after the timed ones."""
    export = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    run_id = ingest_paths(store, [export], "neuron").id
    with TestClient(app) as client:
        advice = client.get(f"/api/runs/{run_id}/advice").json()
        profiles = client.get(f"/api/runs/{run_id}/device/profiles").json()["profiles"]
        recs = [(p["profile_id"], r) for p in profiles
                for r in client.get(f"/api/runs/{run_id}/device/summary?profile={p['profile_id']}").json()
                ["recommendations"]]
    neuron = [f for f in advice["findings"] if f["rule"].startswith("neuron:")]
    assert recs and len(neuron) == len(recs)
    assert all(f["saving_ns"] is None and f["evidence"][0]["kind"] == "device" for f in neuron)
    assert {f["fix"] for f in neuron} == {r["advice"] for _, r in recs}
    timed = [n for n, f in enumerate(advice["findings"]) if f["saving_ns"] is not None]
    assert all(n < advice["findings"].index(neuron[0]) for n in timed)
    store.catalog.close()


def test_every_evidence_link_opens(tmp_path: Path) -> None:
    """Each rule's evidence paths answer 200 on a real server (pages and their query strings are valid)."""
    from bench.synth_ranks import RankPlan, write_rank_traces
    from tests.analysis.advice.builder import rmsnorm_ops

    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    q, s = [2, 4, 128, 64], [2, 4, 128, 128]
    traces = {
        "host": [host_bound_trace(tmp_path / "host.json")],
        "launch": [build([Op("aten::add", 8, [[16]], kernel=1, launch=5)] * 30, tmp_path / "launch.json")],
        "sync": [build([Op("aten::addmm", 10, [[64, 64]], 30, sync=50)] * 4, tmp_path / "sync.json")],
        "loader": [build([Op("aten::addmm", 100, [[64]], 90, gap_before=400, busy_name=loader)] * 5,
                         tmp_path / "dl.json")],
        "fusion": [build([*rmsnorm_ops(20), Op("aten::matmul", 10, [q, [2, 4, 64, 128]], 40),
                          Op("aten::softmax", 10, [s, []], 25), Op("aten::matmul", 10, [s, q], 40)],
                         tmp_path / "fusion.json")],
        "ranks": write_rank_traces(tmp_path / "ranks", RankPlan(world=4, steps=3, units=4, late_rank=2,
                                                                late_ns=5_000_000)),
        "neuron": [Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"],
        "occupancy": [build([Op("aten::addmm", 10, [[64, 64]], 100, kernel_name="sgemm <small>",
                                kargs={"est. achieved occupancy %": 10})] * 3, tmp_path / "occ.json")],
    }
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    seen: set[str] = set()
    with TestClient(app) as client:
        for name, paths in traces.items():
            run_id = ingest_paths(store, paths, name).id
            for f in client.get(f"/api/runs/{run_id}/advice").json()["findings"]:
                seen.add(f["rule"].split(":")[0])
                for e in f["evidence"]:
                    assert client.get(e["path"]).status_code == 200, (f["rule"], e["path"])
    assert seen >= {"host-bound", "pageable-copies", "launch-bound", "sync-points", "dataloader-stalls",
                    "unfused-elementwise", "unfused-attention", "straggler", "exposed-communication", "neuron",
                    "low-occupancy"}
    store.catalog.close()


def test_a_host_only_chain_shows_its_streaming_rate_everywhere(tmp_path: Path) -> None:
    """The streaming model's facts (bytes moved, fused bytes, the fastest op's rate) on the findings page, in the
    CLI text and in the Markdown, the rate in GB/s: (64·2048·4·3 bytes) / 10 µs = 157.3 GB/s for the first mul."""
    x, r, f = [64, 2048], [64, 1], ["float", "float"]
    ops = [Op("aten::mul", 10, [x, x], None, types=f), Op("aten::mean", 14, [x, []], None, types=f),
           Op("aten::add", 3, [r, []], None, types=["float", "Scalar"]), Op("aten::rsqrt", 2, [r], None, types=["float"]),
           Op("aten::mul", 9, [x, r], None, types=f), Op("aten::mul", 12, [x, [2048]], None, types=f)]
    app = create_app(Settings(data_dir=tmp_path / "data"))
    store = app.state.explorer.store
    run_id = ingest_paths(store, [build(ops * 2, tmp_path / "cpu.json")], "cpu").id
    rate = 64 * 2048 * 4 * 3 * 10**9 // 10_000
    shown = f"{rate / 10**9:,.1f} GB/s"
    assert shown == "157.3 GB/s"
    with TestClient(app) as client:
        page = client.get(f"/runs/{run_id}/advice")
        assert page.status_code == 200 and shown in page.text and "streamed fastest" in page.text
    runner, data = CliRunner(), str(tmp_path / "data")
    text = runner.invoke(main, ["advise", run_id, "--data-dir", data])
    md = runner.invoke(main, ["advise", run_id, "--markdown", "--data-dir", data])
    assert text.exit_code == 0 and shown in text.output
    assert md.exit_code == 0 and shown in md.output

"""Source links (vscode://) against the truth: on a real torch.profiler(with_stack=True) profile of
tests/helpers/stack_helper.py, every link of a frame of that file points at the function's file and first line as
`inspect` reads them; local, Remote-SSH and source-map variants; bad settings are refused."""

from __future__ import annotations

import inspect
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.app import create_app
from explorer.config import Settings
from explorer.model.source_links import SourceLinker, SourceRef, parse_call_stack, parse_frame
from explorer.runs.ingest import ingest_paths
from tests.helpers import stack_helper
from tests.helpers.support import cli

HELPER = Path(inspect.getsourcefile(stack_helper) or "").resolve()
LINES = {f.__name__: inspect.getsourcelines(f)[1] for f in (stack_helper.rms_norm, stack_helper.rms_step)}


@pytest.mark.parametrize(("text", "ref"), [
    ("tests/helpers/stack_helper.py(10): rms_norm", SourceRef("tests/helpers/stack_helper.py", 10, "rms_norm")),
    ("/opt/app/train.py(123): <module>", SourceRef("/opt/app/train.py", 123, "<module>")),
    ("torch/nn/modules/module.py(1751): _call_impl", SourceRef("torch/nn/modules/module.py", 1751, "_call_impl")),
    ("<built-in method rsqrt of type object at 0x7f>", None),
    ("aten::mul", None),
    ("nn.Module: Linear_0", None),
    ("x.py(0): f", None),
])
def test_parse_frame(text: str, ref: SourceRef | None) -> None:
    assert parse_frame(text) == ref


def test_call_stack_arg_gives_the_innermost_frame() -> None:
    args = {"Call stack": "<built-in method mul>;/w/model.py(40): forward;/w/train.py(9): main"}
    assert parse_call_stack(args) == SourceRef("/w/model.py", 40, "forward")
    assert parse_call_stack({"Input Dims": [[2]]}) is None


@pytest.mark.parametrize(("linker", "path", "url"), [
    (SourceLinker(), "/w/model.py", "vscode://file/w/model.py:7"),
    (SourceLinker(), "rel/model.py", None),
    (SourceLinker(root="/home/me/src"), "rel/model.py", "vscode://file/home/me/src/rel/model.py:7"),
    (SourceLinker(host="trn-box"), "/w/model.py", "vscode://vscode-remote/ssh-remote+trn-box/w/model.py:7"),
    (SourceLinker(host="me@trn-box", source_map=(("/w", "/home/me/ckpt"), ("/w/sub", "/x"))), "/w/sub/model.py",
     "vscode://vscode-remote/ssh-remote+me@trn-box/x/model.py:7"),  # the longest FROM wins
    (SourceLinker(source_map=(("/w", "/home/me"),)), "/wx/model.py", "vscode://file/wx/model.py:7"),  # whole parts
    (SourceLinker(), "/w/my model's \"x\".py", "vscode://file/w/my%20model%27s%20%22x%22.py:7"),
])
def test_link_variants(linker: SourceLinker, path: str, url: str | None) -> None:
    assert linker.url(SourceRef(path, 7, "f")) == url


@pytest.mark.parametrize("update", [{"source_map": ["no-equals"]}, {"source_map": ["=/x"]},
                                    {"source_host": "box/../../evil"}, {"source_host": "a b"}])
def test_bad_source_settings_are_refused(update: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        Settings(data_dir=tmp_path, **update)


@pytest.mark.parametrize("update", [{"source_map": ["no-equals"]}, {"source_host": "box/../../evil"}])
def test_serve_refuses_bad_source_options(update: dict[str, Any], tmp_path: Path) -> None:
    proc = subprocess.run(cli("serve", "--data-dir", str(tmp_path), "--port", "1", *(
        ["--source-map", update["source_map"][0]] if "source_map" in update else
        ["--source-host", update["source_host"]])), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Error" in proc.stderr


@pytest.fixture(scope="module")
def frames_run(stack_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The with_stack trace's frames of stack_helper.py as the trace names them."""
    raw = json.loads(stack_trace.read_text())
    frames = {e["name"] for e in raw["traceEvents"] if e.get("cat") == "python_function"
              and "stack_helper.py" in e["name"]}
    return tmp_path_factory.mktemp("links"), {"frames": frames}


def _client(tmp: Path, stack_trace: Path, **settings: Any) -> tuple[TestClient, str]:
    client = TestClient(create_app(Settings(data_dir=tmp / f"data{len(list(tmp.iterdir()))}", **settings)))
    run_id = ingest_paths(client.app.state.explorer.store, [stack_trace], "with_stack").id  # type: ignore[attr-defined]
    return client, run_id


def _frame_path(frames: set[str]) -> str:
    """The path the profiler wrote for stack_helper.py (relative to its sys.path entry, or absolute)."""
    paths = {f.split("(")[0] for f in frames}
    assert len(paths) == 1, paths
    return paths.pop()


@pytest.mark.slow
def test_python_view_and_details_link_to_the_right_lines(stack_trace: Path, frames_run: Any) -> None:
    tmp, info = frames_run
    written = _frame_path(info["frames"])
    root = str(HELPER.parents[2]) if not written.startswith("/") else ""
    client, run_id = _client(tmp, stack_trace, source_root=root)
    with client:
        rows = client.get(f"/api/runs/{run_id}/ops", params={"view": "python", "limit": 1000}).json()["rows"]
        links = {r["name"]: r.get("source_url") for r in rows if "stack_helper.py" in r["name"]}
        assert {n.rsplit(": ", 1)[1] for n in links} >= {"rms_norm", "rms_step"}
        for fn, line in LINES.items():
            name = next(n for n in links if n.endswith(": " + fn))
            assert links[name] == f"vscode://file{HELPER}:{line}"
        html = client.get(f"/runs/{run_id}/ops", params={"view": "python"}).text
        assert f'href="vscode://file{HELPER}:{LINES["rms_norm"]}"' in html
        # an ATen op under rms_norm links to rms_norm's frame (its with_stack call stack), via the details API
        slices = client.app.state.explorer.store.table(run_id, "slices")  # type: ignore[attr-defined]
        rsqrt = slices.column("name").to_pylist().index("aten::rsqrt")
        detail = client.get(f"/api/runs/{run_id}/events/{rsqrt}").json()
        assert detail["source_url"] == f"vscode://file{HELPER}:{LINES['rms_norm']}"
        frame = slices.column("name").to_pylist().index(next(n for n in links if n.endswith(": rms_step")))
        assert client.get(f"/api/runs/{run_id}/events/{frame}").json()["source_url"].endswith(
            f"{HELPER}:{LINES['rms_step']}")


@pytest.mark.slow
def test_remote_host_and_source_map(stack_trace: Path, frames_run: Any) -> None:
    tmp, info = frames_run
    written = _frame_path(info["frames"])
    prefix = written.rsplit("/", 1)[0]  # the profiled folder of stack_helper.py, as written
    client, run_id = _client(tmp, stack_trace, source_host="trn-box", source_map=[f"{prefix}=/home/me/checkout/t"])
    with client:
        rows = client.get(f"/api/runs/{run_id}/ops", params={"view": "python", "limit": 1000}).json()["rows"]
        url = next(r["source_url"] for r in rows if r["name"].endswith(": rms_norm") and "stack_helper" in r["name"])
        assert url == f"vscode://vscode-remote/ssh-remote+trn-box/home/me/checkout/t/stack_helper.py:{LINES['rms_norm']}"
        ops = client.get(f"/api/runs/{run_id}/ops").json()["rows"]  # the operators view has no frames to link
        assert not any("source_url" in r for r in ops)

"""The package as a user installs it: the wheel built from this checkout, installed into a fresh virtualenv
outside the checkout, serves every page and asset and writes a self-contained report; the sdist carries the
templates and static assets too.

The virtualenv reuses this environment's installed dependencies (a .pth line, no network); the project itself
comes from the wheel only (asserted), and every command runs from a folder outside the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import fastapi
import httpx
import pytest

from explorer import __version__
from tests.helpers import catalog_hook
from tests.helpers.support import EXTRAS, IMPORT_BLOCKER, free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "api" / "fixtures" / "tiny_kineto.json"  # a GPU trace: ops, kernels, gaps
FRAMES = ROOT / "tests" / "fixtures" / "kineto_recursive_frames.json"  # a host trace, the compare's other run
DEVICE_EXPORT = ROOT / "tests" / "fixtures" / "neuron" / "device_export"  # Neuron device profiles: device pages
ASSET_REF = re.compile(r'(?:src|href)="(/static/[^"]+)"')

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    venv: Path
    work: Path  # the cwd of every command: outside the checkout
    wheel: Path

    def env(self) -> dict[str, str]:
        """This environment minus anything pointing Python at the checkout; with the PostgreSQL switch on,
        its sitecustomize folder (tests/conftest.py) stays on PYTHONPATH: it holds no project code."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        hook = {"PYTHONPATH": os.environ[catalog_hook.HOOK]} if os.environ.get(catalog_hook.HOOK) else {}
        return {**env, **hook, "PYTHONUNBUFFERED": "1",
                "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}

    def run(self, *args: str) -> str:
        done = subprocess.run([str(self.venv / "bin" / "trace-explorer"), *args], cwd=self.work, env=self.env(),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def python(self, code: str) -> str:
        done = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], cwd=self.work, env=self.env(),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("package")
    dist, venv, work = tmp / "dist", tmp / "venv", tmp / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(ROOT)], check=True, cwd=work, capture_output=True, timeout=120)
    (wheel,) = dist.glob("trace_explorer-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # the dependencies as installed here; a plain path line, so that folder's own .pth files (an editable
    # install of this checkout among them) are not processed and the project can only come from the wheel
    (site / "_deps.pth").write_text(str(Path(fastapi.__file__).resolve().parent.parent) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, cwd=work, capture_output=True, timeout=120)
    return Installed(venv, work, wheel)


def test_project_comes_from_the_wheel(installed: Installed) -> None:
    where = installed.python("import api, explorer; print(explorer.__file__); print(api.__file__)").splitlines()
    for path in where:
        assert Path(path).is_relative_to(installed.venv), where
        assert not Path(path).is_relative_to(ROOT), where
    assets = installed.python("from explorer.config import asset_dir; print(asset_dir('templates'));"
                              "print(asset_dir('static'))").splitlines()
    assert [Path(a).relative_to(installed.venv).parts[-3:] for a in assets] == [
        ("explorer", "_assets", "templates"), ("explorer", "_assets", "static")]
    assert installed.run("--version").strip().endswith(__version__)
    # the compiled helpers are in the wheel (built by hatch_build.py), and load from there
    reader = installed.python("from explorer.ingest.chrome import kscan; print(kscan.LIBRARY); print(kscan.available());"
                              "from explorer.analysis import nesting; print(nesting._LIB is not None);"
                              "from explorer.ingest.chrome import gather; print(gather._LIB is not None)")
    assert Path(reader.splitlines()[0]).is_relative_to(installed.venv), reader
    assert reader.splitlines()[1:] == ["True", "True", "True"], reader


@pytest.fixture(scope="module")
def served(installed: Installed) -> Iterator[tuple[str, dict[str, str]]]:
    data = installed.work / "data"
    runs = {name: installed.run("ingest", str(path), "--name", name, "--data-dir", str(data)).strip()
            for name, path in (("gpu", TINY), ("host", FRAMES), ("neuron", DEVICE_EXPORT))}
    port = free_port()
    proc = subprocess.Popen([str(installed.venv / "bin" / "trace-explorer"), "serve", "--port", str(port),
                             "--data-dir", str(data)], cwd=installed.work, env=installed.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base, runs
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _pages(base: str, runs: dict[str, str]) -> list[str]:
    gpu, host, neuron = runs["gpu"], runs["host"], runs["neuron"]
    profiles = httpx.get(f"{base}/api/runs/{neuron}/device/profiles").json()["profiles"]
    assert len(profiles) >= 2, profiles
    a, b = (p["profile_id"] for p in profiles[:2])
    pages = ["/", f"/compare?runs={gpu},{host}", f"/runs/{neuron}/device/{a}",
             f"/device/compare?a={neuron}:{a}&b={neuron}:{b}"]
    for run in (gpu, host):
        pages += [f"/runs/{run}", f"/runs/{run}/ops", f"/runs/{run}/kernels", f"/runs/{run}/timeline",
                  f"/runs/{run}/steps", f"/runs/{run}/sql"]
    return pages


def test_installed_server_serves_every_page_and_asset(served: tuple[str, dict[str, str]]) -> None:
    base, runs = served
    assert httpx.get(f"{base}/-/version").json()["version"] == __version__
    assets: set[str] = set()
    for page in _pages(base, runs):
        r = httpx.get(base + page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), (page, r.text[:300])
        assets |= set(ASSET_REF.findall(r.text))
    paths = {a.split("?")[0] for a in assets}  # content-hashed: /static/js/x.js?v=<hash>
    assert any(a.endswith(".css") for a in paths) and any(a.endswith(".js") for a in paths), assets
    assert any("plotly" in a for a in paths), assets
    for asset in sorted(assets):
        r = httpx.get(base + asset)
        assert r.status_code == 200 and len(r.content) > 100, asset
    breakdown = httpx.get(f"{base}/api/runs/{runs['gpu']}/breakdown")
    assert breakdown.status_code == 200 and breakdown.json()["lanes"]
    download = httpx.get(f"{base}/runs/{runs['gpu']}/report", params={"download": 1})
    assert download.status_code == 200 and "attachment" in download.headers.get("content-disposition", "")
    assert "<script src=" not in download.text


def test_installed_report_inlines_its_assets(installed: Installed, served: tuple[str, dict[str, str]]) -> None:
    _, runs = served
    out = installed.work / "report.html"
    installed.run("report", runs["gpu"], "-o", str(out), "--data-dir", str(installed.work / "data"))
    html = out.read_text(encoding="utf-8")
    assert "<script src=" not in html and 'rel="stylesheet"' not in html  # nothing to fetch
    css = (ROOT / "static" / "css" / "app.css").read_text(encoding="utf-8")
    js = (ROOT / "static" / "js" / "common.js").read_text(encoding="utf-8")
    for text in (css, js):
        line = max(text.splitlines(), key=len)  # a line of the checkout's asset, inside the report
        assert line in html
    assert "plotly.js v" in html or "Plotly" in html


def test_sdist_carries_templates_and_static(tmp_path: Path) -> None:
    """Built by the backend pyproject.toml names (PEP 517 hook), as pip would build it."""
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["build-backend"]
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        name = import_module(backend).build_sdist(str(tmp_path))
    finally:
        os.chdir(cwd)
    with tarfile.open(tmp_path / name) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    wanted = {p.relative_to(ROOT).as_posix() for folder in ("templates", "static") for p in (ROOT / folder).rglob("*")
              if p.is_file()}
    assert wanted and wanted <= members, sorted(wanted - members)
    assert {"pyproject.toml", "README.md", "explorer/__init__.py", "api/cli.py", "hatch_build.py",
            "explorer/ingest/chrome/_kscan.c", "explorer/ingest/chrome/_gather.c", "explorer/analysis/_nest.c"} <= members
    assert not [m for m in members if ".so" in m]  # built where installed


def test_a_wheel_built_without_a_c_compiler_reads_big_traces_with_duckdb(tmp_path: Path) -> None:
    """No compiler where the wheel is built: the build says so and succeeds, the wheel is pure Python (any
    platform), and big traces are read by DuckDB's reader (kscan.available() False)."""
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w",
                            str(dist), str(ROOT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "the compiled helpers are not built" in built.stdout + built.stderr
    (wheel,) = dist.glob("trace_explorer-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "_deps.pth").write_text(str(Path(fastapi.__file__).resolve().parent.parent) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps",
                    str(wheel)], check=True, cwd=tmp_path, capture_output=True, timeout=120)
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "from explorer.ingest.chrome import kscan; "
                            "print(kscan.LIBRARY.is_file(), kscan.available());"
                            "from explorer.analysis import nesting; print(nesting._LIB is not None);"
                            "from explorer.ingest.chrome import gather; print(gather._LIB is not None)"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert probe.stdout.split() == ["False", "False", "False", "False"], probe.stderr




def test_the_wheel_serves_a_trace_without_torch_cuda_or_team_libraries(installed: Installed) -> None:
    """The set-up path a user takes, from the built wheel: `trace-explorer serve trace.json` in the wheel's venv,
    with torch, CUDA's libraries and (on the embedded catalog) the team libraries made unimportable: the trace is
    ingested, the page answers, and the run's address and the ssh line are printed."""
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    (site / "_te_block.py").write_text(IMPORT_BLOCKER)
    (site / "_te_block.pth").write_text('import os; os.environ.get("TE_BLOCK") and __import__("_te_block")\n')
    blocked = list(EXTRAS)
    if os.environ.get(catalog_hook.HOOK):  # the PostgreSQL half's catalog needs the team extra's driver
        blocked = ["torch", "triton", "nvidia"]
    port = free_port()
    env = {**installed.env(), "TE_BLOCK": ",".join(blocked)}
    proc = subprocess.Popen([str(installed.venv / "bin" / "trace-explorer"), "serve", str(TINY), "--port", str(port),
                             "--data-dir", str(installed.work / "data-no-extras")], cwd=installed.work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        assert proc.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("Run "):
            line = proc.stdout.readline()
            assert line, lines
            lines.append(line.rstrip("\n"))
        assert any("ssh -L" in line for line in lines), lines
        url = lines[-1].split(": ", 1)[1]
        assert url.startswith(base + "/runs/") and httpx.get(url).status_code == 200
        probe = subprocess.run([str(installed.venv / "bin" / "python"), "-c", "import torch"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and "blocked by the test" in probe.stderr  # the block was in force
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        (site / "_te_block.pth").unlink()

"""Deployment files: docker-compose.yml and the Dockerfile, checked by parsing (no docker engine here)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from explorer.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DATA_DIR = "/data"


@pytest.fixture(scope="module")
def service() -> dict[str, Any]:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert list(services) == ["explorer"]
    svc: dict[str, Any] = services["explorer"]
    svc["_volumes_top"] = compose.get("volumes") or {}
    return svc


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _command(value: str | list[str]) -> list[str]:
    """A compose/Dockerfile command in exec (list, JSON) or shell form, as words."""
    if isinstance(value, list):
        return [str(v) for v in value]
    value = value.strip()
    if value.startswith("["):
        return [str(v) for v in json.loads(value)]
    return shlex.split(value)


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): str(v) for k, v in env.items()}


def test_named_volume_is_mounted_at_the_data_dir(service: dict[str, Any]) -> None:
    mounts = [v.split(":") if isinstance(v, str) else [v["source"], v["target"]] for v in service["volumes"]]
    named = {m[0]: m[1] for m in mounts if not m[0].startswith((".", "/", "~"))}
    assert DATA_DIR in named.values(), mounts
    volume = next(k for k, v in named.items() if v == DATA_DIR)
    assert volume in service["_volumes_top"], "the data volume must be a top-level named volume"
    assert _env(service)["EXPLORER_DATA_DIR"] == DATA_DIR


def test_port_published_on_loopback_only(service: dict[str, Any]) -> None:
    ports = service["ports"]
    assert ports, "the service publishes its port"
    for port in ports:
        if isinstance(port, dict):
            assert port.get("host_ip") == "127.0.0.1", port
            assert str(port["published"]) == "8000"
        else:
            host_ip, published, target = str(port).split(":")
            assert (host_ip, published, target) == ("127.0.0.1", "8000", "8000")
    assert "network_mode" not in service  # host networking would bypass the loopback-only mapping


def test_healthcheck_hits_health_endpoint(service: dict[str, Any], dockerfile: list[tuple[str, str]]) -> None:
    check = service["healthcheck"]
    test = " ".join(_command(check["test"]))
    assert "/-/health" in test and "127.0.0.1:8000" in test
    assert "curl" not in test and "wget" not in test  # neither exists in python:3.11-slim
    assert any(word == "HEALTHCHECK" and "/-/health" in rest for word, rest in dockerfile)


def test_token_is_required_and_documented(service: dict[str, Any]) -> None:
    token = _env(service)["EXPLORER_TOKEN"]
    # ${VAR:?message}: compose refuses to start, with the message, when the token is unset
    assert re.fullmatch(r"\$\{EXPLORER_TOKEN:\?.+\}", token), token
    assert "EXPLORER_TOKEN" in COMPOSE.read_text().split("services:")[0], "documented in the header comment"
    assert "token" in Settings.model_fields  # the setting the variable feeds (EXPLORER_ prefix)


def test_container_serves_on_all_interfaces_with_serve(service: dict[str, Any],
                                                        dockerfile: list[tuple[str, str]]) -> None:
    starts = [(w, r) for w, r in dockerfile if w in ("CMD", "ENTRYPOINT")]
    assert starts, "the Dockerfile says how to start"
    words = [word for _, rest in starts for word in _command(rest)]
    assert words[:2] == ["trace-explorer", "serve"], words
    assert "0.0.0.0" in words  # so the published port reaches it; hence the token
    assert _command(service["command"])[:2] == ["trace-explorer", "serve"]


def _stages(dockerfile: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The build stages, each starting with its FROM."""
    stages: list[list[tuple[str, str]]] = []
    for word, rest in dockerfile:
        if word == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word, rest))
    return stages


def test_dockerfile_builds_a_wheel_and_installs_it(dockerfile: list[tuple[str, str]]) -> None:
    build, final = _stages(dockerfile)
    base, _, name = build[0][1].partition(" AS ")
    assert base == "python:3.11-slim" and name.strip(), build[0]
    copied = {source for word, rest in build if word == "COPY" for source in rest.split()[:-1]}
    for needed in ("pyproject.toml", "hatch_build.py", "explorer", "api", "templates", "static"):
        assert needed in copied, f"the wheel is built from {needed}"
    build_run = " ".join(rest for word, rest in build if word == "RUN")
    assert "pip wheel" in build_run and "-w /dist" in build_run
    # the compiled events reader (hatch_build.py) needs a C compiler where the wheel is built
    assert build_run.index("gcc") < build_run.index("pip wheel")
    # the image itself: only the wheel comes in (no checkout, no editable install)
    assert final[0] == ("FROM", "python:3.11-slim")
    assert [rest for word, rest in final if word == "COPY"] == [f"--from={name.strip()} /dist /dist"]
    run = " ".join(rest for word, rest in final if word == "RUN")
    assert "pip install" in run and "/dist/trace_explorer-*.whl" in run
    assert "-e " not in run and "pip install ." not in run
    assert ("ARG", "WITH_TORCH=0") in final and '"${wheel}[team,torch]"' in run and '"${wheel}[team]"' in run


def test_dockerignore_keeps_data_and_env_out() -> None:
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".venv", "explorer-data", ".git", ".env"} <= ignored

"""The team server's compose file (deploy/compose.team.yml) and its Caddyfile, checked by parsing (no docker
engine here): every service's environment points at the others, the settings it sets exist, the commands
it runs exist, stateful services keep their data on named volumes, and only the proxy is published."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import pytest
import yaml

from api.cli import main as cli_main
from explorer.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.team.yml"
EXPLORER_SERVICES = ("migrate", "web-1", "web-2", "worker")
WEB = ("web-1", "web-2")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())  # anchors and merge keys resolved
    return loaded


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    svcs: dict[str, Any] = compose["services"]
    return svcs


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _words(value: str | list[str]) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else shlex.split(value)


def test_the_parts_are_there(services: dict[str, Any]) -> None:
    assert set(services) == {"postgres", "minio", "minio-bucket", "migrate", "web-1", "web-2", "worker", "proxy"}
    assert services["worker"]["deploy"]["replicas"] == 2  # two workers; `--scale worker=N` for more


def test_every_explorer_setting_exists(services: dict[str, Any]) -> None:
    """An EXPLORER_ variable the settings do not know would be ignored silently (extra="ignore")."""
    for name in EXPLORER_SERVICES:
        for key in _env(services[name]):
            if key.startswith("EXPLORER_"):
                assert key.removeprefix("EXPLORER_").lower() in Settings.model_fields, (name, key)


def test_every_command_exists(services: dict[str, Any]) -> None:
    ctx = click.Context(cli_main)
    for name in EXPLORER_SERVICES:
        words = _words(services[name]["command"])
        assert words[0] == "trace-explorer", (name, words)
        command: click.Command | None = cli_main
        for word in words[1:]:
            if word.startswith("-") or not isinstance(command, click.Group):
                break
            command = command.get_command(ctx, word)
            assert command is not None, (name, words)
    assert _words(services["worker"]["command"]) == ["trace-explorer", "worker"]
    assert _words(services["migrate"]["command"]) == ["trace-explorer", "db", "upgrade"]
    for name in WEB:
        assert _words(services[name]["command"])[:2] == ["trace-explorer", "serve"]


def test_catalog_and_queue_point_at_the_postgres_service(services: dict[str, Any]) -> None:
    pg = _env(services["postgres"])
    for name in EXPLORER_SERVICES:
        env = _env(services[name])
        url = urlsplit(env["EXPLORER_CATALOG_URL"])
        assert url.scheme.startswith("postgresql") and url.hostname == "postgres" and url.port == 5432, name
        assert url.username == pg["POSTGRES_USER"] and url.path == "/" + pg["POSTGRES_DB"], name
        assert env["EXPLORER_INGEST_QUEUE"] == "postgres", name  # the web replicas only enqueue
        deps = services[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", name
    # the worker's healthcheck asks the same database
    check = " ".join(_words(services["worker"]["healthcheck"]["test"]))
    assert "postgresql://explorer@postgres:5432/explorer" in check


def test_storage_points_at_minio_and_its_bucket(services: dict[str, Any]) -> None:
    minio = services["minio"]
    address = _words(minio["command"])[_words(minio["command"]).index("--address") + 1]
    bucket_cmd = " ".join(_words(services["minio-bucket"]["command"]))
    made = re.search(r"mc mb (?:--ignore-existing )?local/(\S+)", bucket_cmd)
    assert made, bucket_cmd
    for name in EXPLORER_SERVICES:
        env = _env(services[name])
        storage = urlsplit(env["EXPLORER_STORAGE"])
        assert storage.scheme == "s3" and storage.netloc == made.group(1), (name, env["EXPLORER_STORAGE"])
        endpoint = urlsplit(env["AWS_ENDPOINT_URL_S3"])
        assert endpoint.hostname == "minio" and f":{endpoint.port}" == address, name
        assert env["AWS_ACCESS_KEY_ID"] == _env(minio)["MINIO_ROOT_USER"], name
        assert env["AWS_SECRET_ACCESS_KEY"].startswith("${MINIO_ROOT_PASSWORD:?"), name
    assert _env(minio)["MINIO_ROOT_PASSWORD"].startswith("${MINIO_ROOT_PASSWORD:?")
    for name in EXPLORER_SERVICES:
        if name != "migrate":
            assert services[name]["depends_on"]["minio-bucket"]["condition"] == "service_completed_successfully"
            assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_token_required(services: dict[str, Any]) -> None:
    for name in EXPLORER_SERVICES:
        token = _env(services[name])["EXPLORER_TOKEN"]
        assert re.fullmatch(r"\$\{EXPLORER_TOKEN:\?.+\}", token), (name, token)


def test_proxy_reaches_every_replica_and_only_it_is_published(services: dict[str, Any]) -> None:
    caddy = (DEPLOY / "Caddyfile").read_text()
    upstreams = re.search(r"reverse_proxy\s+([^{\n]+)\{", caddy)
    assert upstreams, caddy
    assert sorted(upstreams.group(1).split()) == [f"{w}:8000" for w in WEB]
    assert "health_uri /-/health" in caddy
    for name in WEB:
        words = _words(services[name]["command"])
        assert words[words.index("--port") + 1] == "8000" and words[words.index("--host") + 1] == "0.0.0.0"
        assert services["proxy"]["depends_on"][name]["condition"] == "service_healthy"
    mounts = [str(v) for v in services["proxy"]["volumes"]]
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in mounts
    assert services["proxy"]["ports"] == ["127.0.0.1:8000:8000"]
    for name, svc in services.items():
        if name != "proxy":
            assert "ports" not in svc and "network_mode" not in svc, name


def test_stateful_services_keep_data_on_named_volumes(compose: dict[str, Any], services: dict[str, Any]) -> None:
    top = compose["volumes"]
    wanted = {"postgres": "/var/lib/postgresql/data", "minio": "/data", "web-1": "/data", "web-2": "/data"}
    for name, target in wanted.items():
        mounts = dict(str(v).split(":")[:2] for v in services[name]["volumes"])
        volume = next(k for k, v in mounts.items() if v == target)
        assert volume in top, (name, volume)
    # each replica has its own cache volume: a replica's folder is a cache, never shared state
    assert services["web-1"]["volumes"] != services["web-2"]["volumes"]


def test_healthchecks(services: dict[str, Any]) -> None:
    for name in ("postgres", "minio", "web-1", "web-2", "worker", "proxy"):
        assert services[name].get("healthcheck", {}).get("test"), name
    for name in WEB:
        assert "/-/health" in " ".join(_words(services[name]["healthcheck"]["test"]))

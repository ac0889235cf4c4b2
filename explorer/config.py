"""The one settings object. Every setting has a default and help text; nothing else reads os.environ."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout (or site-packages, once installed)


def asset_dir(name: str) -> Path:
    """`templates` or `static`: inside the installed package, where the wheel build maps them
    (explorer/_assets/, pyproject.toml), else at the top of the checkout (an editable install)."""
    packaged = resources.files("explorer") / "_assets" / name
    return Path(str(packaged)) if packaged.is_dir() else PROJECT_ROOT / name


LEGACY_DATA_DIR = Path("explorer-data")  # the default of earlier versions, in whatever folder a command ran


def default_data_dir(settings: dict[str, Any]) -> Path:
    """Where runs live unless told: `./explorer-data` when the current folder has one (made by an earlier version:
    adopted, and the commands say so), else the user's data folder, the same from any working directory."""
    return LEGACY_DATA_DIR.resolve() if LEGACY_DATA_DIR.is_dir() else user_data_dir(settings.get("xdg_data_home", ""))


def user_data_dir(xdg_data_home: str = "") -> Path:
    """$XDG_DATA_HOME/trace-explorer, by default ~/.local/share/trace-explorer."""
    return Path(xdg_data_home or Path.home() / ".local" / "share") / "trace-explorer"


SSH_HOST = re.compile(r"^[A-Za-z0-9._@-]*$")  # an ssh host alias or user@host: nothing that could bend a URL


def default_cache_memory_mb() -> int:
    """A third of this machine's memory, in MB (1,024 where the system does not say): what a server's runs kept in
    memory may take by default (Settings.cache_memory_mb); the rest is for its requests and its ingests."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX, or the value is unknown
        return 1_024
    return max(1_024, total // 3 // 2**20)


def parse_source_map(items: list[str]) -> tuple[tuple[str, str], ...]:
    """`FROM=TO` pairs (the profiled path prefix, the checkout's); ValueError names a malformed one."""
    pairs = []
    for item in items:
        src, sep, dst = item.partition("=")
        if not sep or not src.strip() or not dst.strip():
            raise ValueError(f"source map {item!r} is not FROM=TO")
        pairs.append((src.rstrip("/") or "/", dst.rstrip("/") or "/"))
    return tuple(pairs)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EXPLORER_", extra="ignore")

    xdg_data_home: str = Field("", validation_alias=AliasChoices("xdg_data_home", "XDG_DATA_HOME"),
                               description="The user's data folders (XDG base directories): the default data folder "
                               "is trace-explorer inside it; empty: ~/.local/share")
    data_dir: Path = Field(default_factory=default_data_dir,
                           description="Folder holding the catalog and run tables; default ~/.local/share/trace-explorer "
                           "($XDG_DATA_HOME/trace-explorer), or ./explorer-data where the current folder has one")
    catalog_url: str = Field(
        "", description="Catalog database: postgresql://user@host:5432/db for a team server (several processes "
        "and machines), or sqlite:///path; empty: catalog.sqlite in the data folder")
    storage: str = Field(
        "", description="Where runs' files live: a folder or file:///mnt/fsx/explorer (local or mounted: NFS, EFS, "
        "FSx for Lustre), or s3://bucket/prefix (S3-compatible; credentials from the usual AWS variables, a "
        "profile or an instance role); empty: the data folder, as before")
    s3_endpoint_url: str = Field(
        "", validation_alias=AliasChoices("s3_endpoint_url", "EXPLORER_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                                          "AWS_ENDPOINT_URL"),
        description="S3 endpoint for s3:// storage (MinIO, Ceph, moto...); default $AWS_ENDPOINT_URL_S3, else "
        "$AWS_ENDPOINT_URL, else AWS's own")
    s3_region: str = Field(
        "", validation_alias=AliasChoices("s3_region", "EXPLORER_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
        description="Region of the s3:// storage's bucket; default $AWS_REGION, else $AWS_DEFAULT_REGION")
    host: str = Field("127.0.0.1", description="Address to bind; non-loopback addresses require a token")
    port: int = Field(8000, description="Port serving pages, API and static files")
    root_path: str = Field("", description="Path prefix when served behind a reverse proxy")
    token: str | None = Field(None, description="Access token; required when binding a non-loopback address")
    allowed_hosts: list[str] = Field(
        [], description="Host names the server answers to besides loopback and the bound address ('*': any)")
    forwarded_allow_ips: str = Field(
        "127.0.0.1", description="Proxies trusted for X-Forwarded-Proto/For (HTTPS is then seen, cookies Secure)")
    max_connections: int = Field(
        1000, ge=1, description="Open client connections `serve` keeps at most (and fewer than its file-descriptor "
        "limit allows, less a reserve); past it the connection longest idle or waiting for its request headers is "
        "closed first, else the new one")
    header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a connection may take to send a request's headers, all of them, from its "
        "first byte (or from the connection's start); then it is closed (slow clients hold no connection)")
    body_timeout_s: float = Field(
        60.0, gt=0, description="Seconds without a byte of a request body the server is reading after which the "
        "connection is closed (an upload that stalls)")
    keep_alive_s: int = Field(5, ge=1, description="Seconds an idle keep-alive connection stays open (uvicorn's "
                              "timeout_keep_alive)")
    auth_failures_per_minute: int = Field(
        20, ge=0, description="Wrong tokens one client address may send in a minute; past it every token request from "
        "that address gets 429 with Retry-After until its oldest failure is a minute old (0: no limit)")
    max_upload_bytes: int = Field(4 * 2**30, description="Largest accepted upload, all files together")
    max_queued_bytes: int = Field(
        16 * 2**30, ge=1, description="Most bytes of uploads held in the data folder's tmp/ at once (being received, "
        "waiting for or in their ingest); an upload past it gets 503 with Retry-After, before its body fills the disk")
    max_uncompressed_bytes: int = Field(8 * 2**30, description="Largest decompressed size of one input file")
    max_events: int = Field(200_000_000, ge=1, description="Most slices one run may hold (a clear error past it)")
    max_tracks: int = Field(100_000, ge=1, description="Most tracks (threads x lanes) one run may have")
    max_depth: int = Field(10_000, ge=1, description="Deepest slice nesting one run may have")
    max_name_chars: int = Field(1_048_576, ge=16, description="Longer slice names are cut to this, with a warning "
                                "(C++ kernel names reach several thousand characters)")
    ingest_memory_mb: int = Field(
        1500, ge=64, description="Memory one ingest may use, in MB: bounds DuckDB's reader (it spills to the run's "
        "scratch folder past it), the batch size and what slice args are held at once (big files keep them on disk); "
        "split between the processes parsing a multi-file run's files at once")
    ingest_workers: int = Field(2, ge=1, description="Concurrent background ingests (a slow upload does not hold back the next)")
    native_reader: bool = Field(
        True, description="Read big Chrome/Kineto files with the compiled events reader where it is built "
        "(explorer/ingest/chrome/_kscan.c); false: DuckDB's reader, as before it")
    ingest_processes: int = Field(
        2, ge=1, description="Files (ranks) of one multi-file Chrome/Kineto run parsed at once: the ingest's own "
        "process and this many minus one parsers beside it (1: every file in turn in the ingest's own process)")
    ingest_parse_in: Literal["threads", "processes"] = Field(
        "threads", description="Where those parsers run: threads of the ingest's process (no start-up cost; the "
        "default, measured faster on 2 cores) or worker processes started from a forkserver (no GIL shared, "
        "for many cores: each costs ~1.4 CPU s of imports)")
    index_files: Literal["first_build", "ingest", "off"] = Field(
        "first_build", description="Where a run's timeline index (the timeline's windows) is kept as files in the "
        "run's folder (~100 bytes a slice), which a server then maps (no copy in its memory, none rebuilt after a "
        "restart): first_build, by the first build of a run of at least 200k slices (a server's warm-up after an "
        "upload, or the run's first view); ingest, by the ingest itself, once its slices are written (the ingest "
        "takes 15-40 % longer); off, never (each server process builds it in its own memory)")
    ingest_queue: Literal["inline", "postgres"] = Field(
        "inline", description="Where uploads are ingested: inline (the web process's own worker threads) or "
        "postgres (jobs on a procrastinate queue in the catalog's PostgreSQL database, run by `trace-explorer "
        "worker` processes on any machine sharing the data folder; the web process only enqueues)")
    worker_concurrency: int = Field(
        1, ge=1, description="Jobs one `trace-explorer worker` process runs at once (threads: parsing holds the "
        "GIL, so run one worker process per core rather than raising this)")
    queue_stalled_s: float = Field(
        60.0, gt=0, description="Seconds without a heartbeat after which a queue worker counts as dead: its jobs "
        "go back to the queue for another worker (workers beat every third of it)")
    queue_max_attempts: int = Field(
        5, ge=1, description="Most runs of one ingest job (a transient error or a dead worker costs one); then "
        "its run fails")
    queue_retry_wait_s: int = Field(
        2, ge=1, description="Backoff base of a retried ingest job, in seconds: the n-th retry waits base**n")
    sql_timeout_s: float = Field(10.0, description="Time limit of one SQL query")
    sql_max_rows: int = Field(10000, description="Row limit of one SQL query result")
    cache_runs: int = Field(4, description="Runs whose tables (slices without args, tracks, ...) stay in memory")
    cache_memory_mb: int = Field(
        default_factory=default_cache_memory_mb, ge=1,
        description="Most memory, in MB, that the runs kept in memory take together: their tables and the values "
        "derived from them (timeline index, op tables, breakdowns); past it the least recently used go, never the "
        "run in use (~220 bytes a slice: a run bigger than this is still served, alone). Default: a third of this "
        "machine's memory")
    cache_disk_mb: int = Field(
        20_480, ge=1, description="With runs on object storage: local copies of runs (read by this process) kept in "
        "the data folder's cache/, in MB; the least recently read are dropped past it")
    derived_cache_entries: int = Field(
        16, description="Per-run derived values kept in memory (timeline index, breakdown, kernel table), all runs")
    device_cache_entries: int = Field(
        16, description="Device profiles (Neuron) whose whole-profile page data stays in memory, all runs")
    op_table_cache: int = Field(
        8, description="Op tables computed on load (grouped by nn.Module, or of runs stored before op views)")
    templates_dir: Path = Field(asset_dir("templates"), description="Jinja templates")
    static_dir: Path = Field(asset_dir("static"), description="Static assets (JS, CSS, vendored plotly)")
    watch_dirs: list[Path] = Field(
        default_factory=list, description="Folders whose new traces are ingested as they appear (serve --watch)")
    watch_poll_s: float = Field(1.0, gt=0, description="Seconds between two scans of the watched folders")
    watch_settle_s: float = Field(
        3.0, ge=0, description="Quiet seconds after a step's last file completes before its run is ingested")
    watch_stale_s: float = Field(
        60.0, gt=0, description="Seconds unchanged after which an unclosed watched file is ingested anyway")
    source_host: str = Field("", description="SSH host the profiled source lives on: source links open it with "
                             "VS Code Remote-SSH (vscode://vscode-remote/ssh-remote+HOST/...); empty: local files")
    source_map: list[str] = Field(default_factory=list, description="FROM=TO path prefix rewrites for source "
                                  "links (the profiled path -> the checkout VS Code opens), longest FROM first")
    source_root: str = Field("", description="Folder that relative frame paths (as torch writes them) are joined "
                             "to for source links; empty: relative frames get no link")

    @field_validator("source_host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not SSH_HOST.match(value):
            raise ValueError(f"source host {value!r} is not an ssh host name")
        return value

    @field_validator("source_map")
    @classmethod
    def _source_map(cls, value: list[str]) -> list[str]:
        parse_source_map(value)
        return value

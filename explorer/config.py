"""The one settings object. Every setting has a default and help text; nothing else reads os.environ."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout (or site-packages, once installed)


def asset_dir(name: str) -> Path:
    """`templates` or `static`: inside the installed package, where the wheel build maps them
    (explorer/_assets/, pyproject.toml), else at the top of the checkout (an editable install)."""
    packaged = resources.files("explorer") / "_assets" / name
    return Path(str(packaged)) if packaged.is_dir() else PROJECT_ROOT / name


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EXPLORER_", extra="ignore")

    data_dir: Path = Field(Path("explorer-data"), description="Folder holding the catalog and run tables")
    host: str = Field("127.0.0.1", description="Address to bind; non-loopback addresses require a token")
    port: int = Field(8000, description="Port serving pages, API and static files")
    root_path: str = Field("", description="Path prefix when served behind a reverse proxy")
    token: str | None = Field(None, description="Access token; required when binding a non-loopback address")
    allowed_hosts: list[str] = Field(
        [], description="Host names the server answers to besides loopback and the bound address ('*': any)")
    forwarded_allow_ips: str = Field(
        "127.0.0.1", description="Proxies trusted for X-Forwarded-Proto/For (HTTPS is then seen, cookies Secure)")
    max_upload_bytes: int = Field(4 * 2**30, description="Largest accepted upload, all files together")
    max_uncompressed_bytes: int = Field(8 * 2**30, description="Largest decompressed size of one input file")
    ingest_workers: int = Field(1, description="Concurrent background ingests")
    sql_timeout_s: float = Field(10.0, description="Time limit of one SQL query")
    sql_max_rows: int = Field(10000, description="Row limit of one SQL query result")
    cache_runs: int = Field(4, description="Runs whose tables (slices without args, tracks, ...) stay in memory")
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

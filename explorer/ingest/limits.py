"""Per-run limits of an ingest (Settings: EXPLORER_MAX_EVENTS, _MAX_TRACKS, _MAX_DEPTH, _MAX_NAME_CHARS,
_INGEST_MEMORY_MB): past a count limit a clear error naming the setting, a longer name cut with a warning.
They bound what one upload can cost the server. The limits: docs/reliability.md."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.config import Settings
from explorer.errors import BadTrace

_DEFAULTS = Settings.model_fields  # the one place the defaults are written


@dataclass(frozen=True)
class IngestLimits:
    max_events: int = _DEFAULTS["max_events"].default
    max_tracks: int = _DEFAULTS["max_tracks"].default
    max_depth: int = _DEFAULTS["max_depth"].default
    max_name_chars: int = _DEFAULTS["max_name_chars"].default
    processes: int = _DEFAULTS["ingest_processes"].default  # not a count limit: how many files parse at once
    memory_mb: int = _DEFAULTS["ingest_memory_mb"].default  # a budget the ingest keeps to, not a count it checks
    parse_threads: int = 0  # not a limit: a file's reader threads, 0 one per core (parts share them)
    native_reader: bool = _DEFAULTS["native_reader"].default  # the compiled reader where built (Settings)
    parse_in: str = _DEFAULTS["ingest_parse_in"].default  # a multi-file run's other parsers: threads or processes

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestLimits:
        return cls(settings.max_events, settings.max_tracks, settings.max_depth, settings.max_name_chars,
                   settings.ingest_processes, settings.ingest_memory_mb, native_reader=settings.native_reader,
                   parse_in=settings.ingest_parse_in)

    def check(self, what: str, count: int, limit: int, setting: str, source: str) -> None:
        if count > limit:
            raise BadTrace(source, f"{what} {count:,}, over the limit of {limit:,} (raise it with {setting})")

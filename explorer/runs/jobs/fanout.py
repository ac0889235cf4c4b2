"""What an ingest job needs of its queue: the run's store and shared files, and the fan-out counter that
splits a run's files into parse jobs and defers one merge when the last is parsed. A protocol, so the jobs
(tasks.py) and the queue that runs them (queue.py) no longer import each other."""

from __future__ import annotations

from typing import Any, Protocol

from explorer.config import Settings
from explorer.runs.jobs.shared import SharedFiles
from explorer.store.runs import RunStore


class Fanout(Protocol):
    settings: Settings
    store: RunStore
    shared: SharedFiles

    def start_fanout(self, run_id: str, plan: dict[str, Any]) -> None: ...

    def mark_parsed(self, run_id: str, index: int) -> tuple[int, int]: ...

    def is_parsed(self, run_id: str, index: int) -> bool: ...

    def fanout_plan(self, run_id: str) -> dict[str, Any] | None: ...

    def end_fanout(self, run_id: str) -> None: ...

    def defer_parse(self, **kwargs: Any) -> None: ...

    def defer_merge(self, run_id: str) -> None: ...

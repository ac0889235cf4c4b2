"""Imported first by the forkservers whose children ingest (explorer.runs.apart, explorer.ingest.parallel): it
makes the forkserver itself an ingest process (explorer.native.memory.as_ingest_process) before the modules it
preloads import pyarrow.parquet, so the modules an ingest process refuses are never loaded there, and every
child it forks starts refusing them, with glibc's thresholds already set. Importing this module is its whole
use: a forkserver exists only to fork ingests."""

from __future__ import annotations

from explorer.native.memory import as_ingest_process

as_ingest_process()

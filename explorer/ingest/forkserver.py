"""Imported first by the forkservers whose children ingest (explorer.ingest_apart's, explorer.ingest.parallel's):
the forkserver becomes an ingest process (explorer.ingest.memory.as_ingest_process) before it imports the
ingest, so its children start from it without pandas (which pyarrow would load at the ingest modules' first
Arrow array of a Python list) and with the allocator settings an ingest runs with."""

from explorer.ingest.memory import as_ingest_process

as_ingest_process()

"""The run layer: the only layer that joins ingest, store and analysis for a run (../shared/LAYOUT.md).

Here: ingest-and-save (`ingest`), a run's record, name and content hash (`records`), the server's ingesters
(inline, in a process of its own: `apart`; or on the PostgreSQL job queue: `jobs`), and the log-folder watcher.
"""

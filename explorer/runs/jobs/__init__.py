"""Ingest on a PostgreSQL job queue (procrastinate): the web process enqueues a run, `trace-explorer worker`
processes on any machine run its jobs. `queue` builds the app and enqueues, `tasks` are the jobs, `worker`
runs them and hands stalled ones back, `shared` moves files between machines. Inline ingest is not here
(explorer.runs.ingest, api.upload)."""

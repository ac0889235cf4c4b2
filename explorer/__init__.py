"""Trace Explorer: ingest ML profiler traces, store them as Parquet, analyse and serve them."""

__version__ = "0.1.0"

"""Catalog (SQLite) + per-run Parquet tables, queried in-process with DuckDB / Arrow."""

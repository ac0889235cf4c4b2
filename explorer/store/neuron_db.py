"""A run seen as a Neuron Explorer database: the Explorer's table names answered by the read-only SQL sandbox
(explorer.store.sql). Named by a run's id or name; `<run>@<profile>` adds that device profile's tables (a
run with exactly one has them under its own name too). HTTP is not here."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from explorer.errors import BadRequest, RunNotFound
from explorer.model.neuron_schema import fields_of
from explorer.model.tables import TABLE_SCHEMAS
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore
from explorer.store.sql import SQL_TABLES, SqlResult, run_sql

# SystemProfileEvents (schema 7.4) as a view over the run's slices and tracks: the published fields, from
# the slice's own columns or, for the Neuron-specific ones, from its args (null where a trace has none);
# `lane` is the explorer's own extra column.
SYSTEM_PROFILE_EVENTS = """
SELECT s.slice_id AS id, s.name AS name, s.ts_ns AS start_ts, s.ts_ns + s.dur_ns AS end_ts,
       s.dur_ns AS duration_ns, s.cat AS trace_event_source,
       coalesce(json_extract_string(s.args, '$.instance_id'), t.instance) AS instance_id,
       TRY_CAST(json_extract_string(s.args, '$.process_id') AS BIGINT) AS process_id,
       TRY_CAST(json_extract_string(s.args, '$.thread_id') AS BIGINT) AS thread_id,
       TRY_CAST(json_extract_string(s.args, '$.nc_idx') AS BIGINT) AS nc_idx,
       TRY_CAST(json_extract_string(s.args, '$.pcore_idx') AS BIGINT) AS pcore_idx,
       TRY_CAST(json_extract_string(s.args, '$.worker_gid') AS BIGINT) AS worker_gid,
       TRY_CAST(json_extract_string(s.args, '$.flow_id[*]') AS VARCHAR[]) AS flow_id,
       json_extract_string(s.args, '$.framework_stream_id') AS framework_stream_id,
       s.args AS extra_attributes_json, s.lane AS lane
FROM slices s JOIN tracks t USING (track_id)
"""
VIEWS = {"SystemProfileEvents": SYSTEM_PROFILE_EVENTS}
EXTRA_FIELDS: dict[str, list[dict[str, object]]] = {
    "SystemProfileEvents": [{"name": "lane", "type": "string", "unit": "", "required": True}]}
_TYPE_NAMES = {"i64": "integer (int64)", "i32": "integer (int32)", "f32": "number (float)", "f64": "number (double)",
               "str": "string", "bool": "boolean", "[i64]": "array of integer", "[str]": "array of string"}


@dataclass
class NeuronDb:
    """One database: the run, the device profile whose tables it shows (if any), and those tables."""

    run: RunRecord
    run_tables: list[str]  # the run's own tables (explorer names) that it has
    profile_id: str | None = None
    device_tables: dict[str, pa.Table] = field(default_factory=dict)

    def table_names(self) -> list[str]:
        return [*VIEWS, *self.device_tables, *self.run_tables]


def resolve_db(store: RunStore, name: str) -> NeuronDb:
    """The database `name` names: a run id or name, optionally `@<device profile>`; RunNotFound otherwise."""
    run = _find_run(store, name)
    profile: str | None = None
    if run is None and "@" in name:
        run_name, _, profile = name.rpartition("@")
        run = _find_run(store, run_name)
    if run is None:
        raise RunNotFound(name)
    store.require_ready(run.id)
    profiles = store.device_profiles(run.id).to_pylist()
    chosen = [p for p in profiles if profile in (p["profile_id"], p["name"])] if profile else (
        profiles if len(profiles) == 1 else [])
    if profile and not chosen:
        raise BadRequest(f"run {run.id} has no device profile {profile!r}",
                         {"profiles": [p["name"] for p in profiles]})
    own = [t for t in SQL_TABLES if store.table_path(run.id, t).exists()]
    if not chosen:
        return NeuronDb(run, own)
    pid = str(chosen[0]["profile_id"])
    stored = (store.run_dir(run.id) / "device" / pid).glob("*.parquet")
    return NeuronDb(run, own, pid, {p.stem: store.device_table(run.id, pid, p.stem) for p in sorted(stored)})


def _find_run(store: RunStore, name: str) -> RunRecord | None:
    try:
        return store.get(name)
    except RunNotFound:
        pass
    records, _ = store.catalog.list(name=name, status="ready", limit=1000)
    exact = [r for r in records if r.name == name]
    return exact[0] if exact else None


def db_names(store: RunStore, run: RunRecord) -> list[str]:
    """The names this run's databases go by: the run id, and `<id>@<profile>` for each device profile."""
    return [run.id, *(f"{run.id}@{p}" for p in store.device_profiles(run.id).column("name").to_pylist())]


def require_table(db: NeuronDb, table: str) -> None:
    if table not in db.table_names():
        raise BadRequest(f"database {db.run.id} has no table {table!r}", {"tables": db.table_names()})


def query_db(store: RunStore, db: NeuronDb, sql: str, timeout_s: float, max_rows: int) -> SqlResult:
    """One read-only SELECT over the database's tables (the SQL endpoint's sandbox and limits)."""
    return run_sql(store, db.run.id, sql, timeout_s, max_rows, tables=db.device_tables, views=VIEWS)


def table_schema(db: NeuronDb, table: str) -> list[dict[str, object]]:
    """A table's fields as the Explorer's schema lists them (name, type, unit, required); the published
    schema where the table is a Neuron one, else the stored columns."""
    require_table(db, table)
    published = fields_of(table)
    if published:
        fields: list[dict[str, object]] = [{"name": f.name, "type": _TYPE_NAMES.get(f.type, f.type),
                                            "unit": "nanoseconds" if f.ns else "", "required": f.required}
                                           for f in published]
        return fields + EXTRA_FIELDS.get(table, [])
    schema = db.device_tables[table].schema if table in db.device_tables else TABLE_SCHEMAS[table]
    return [{"name": f.name, "type": str(f.type), "unit": "nanoseconds" if f.name.endswith("_ns") else "",
             "required": not f.nullable} for f in schema]


def table_rows(store: RunStore, db: NeuronDb, table: str) -> int:
    rows = db.device_tables[table] if table in db.device_tables else store.table(
        db.run.id, "slices" if table in VIEWS else table)
    return int(rows.num_rows)

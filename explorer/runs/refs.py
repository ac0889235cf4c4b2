"""Run references as the command line and /api/check take them: a run id, `tag:NAME[@latest|@N]`, or (the command
line) a run's exact name when one run has it.

Only refs to stored runs; a path on disk is the CLI's to ingest (explorer/cli.py) before it gets here.
"""

from __future__ import annotations

import re

from explorer.errors import BadRequest, RunNotFound
from explorer.store.catalog.catalog import RunRecord
from explorer.store.runs import RunStore

_TAG_REF = re.compile(r"^tag:(?P<tag>[^@]+)(?:@(?P<which>latest|\d+))?$")
REF_HELP = "a run id, or tag:NAME@latest (the newest ready run tagged NAME), tag:NAME@N (the N-th before it)"


def resolve_run_ref(store: RunStore, ref: str) -> RunRecord:
    """The ready run `ref` names. `tag:nightly` = `tag:nightly@latest` = `tag:nightly@0` is the newest ready
    run tagged nightly, `tag:nightly@1` the one before it (newest by ingest time)."""
    ref = ref.strip()
    m = _TAG_REF.match(ref)
    if m is None:
        if ref.startswith("tag:") or not ref:
            raise BadRequest(f"run reference {ref!r} is not {REF_HELP}")
        return store.require_ready(ref)
    which = m.group("which") or "latest"
    index = 0 if which == "latest" else int(which)
    records, total = store.catalog.list(tag=m.group("tag"), status="ready", limit=1, offset=index)
    if not records:
        raise RunNotFound(ref, f"{ref}: only {total} ready runs are tagged {m.group('tag')!r}" if total else
                          f"{ref}: no ready run is tagged {m.group('tag')!r}")
    return records[0]


NAME_REF_HELP = "a run id, a run's name (when one run has it), " + REF_HELP.removeprefix("a run id, or ")


def resolve_cli_ref(store: RunStore, ref: str) -> RunRecord:
    """What every command of the command line takes for a run: a ref of resolve_run_ref, else the one run whose
    name is exactly `ref` (several: an error listing their ids)."""
    try:
        return resolve_run_ref(store, ref)
    except RunNotFound:
        if ref.startswith("tag:"):
            raise
    records, _ = store.catalog.list(name=ref, limit=1000)
    named = [r for r in records if r.name == ref]
    if len(named) == 1:
        return store.require_ready(named[0].id)
    if named:
        ids = ", ".join(r.id for r in named[:10])
        raise BadRequest(f"{len(named)} runs are named {ref!r} ({ids}): give a run id")
    raise RunNotFound(ref, f"no run with id or name {ref!r} in the data folder {store.data_dir}")

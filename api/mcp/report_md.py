"""A run's report as Markdown for an agent (the MCP resource run://{run}/report.md): the run, device busy and the
largest gaps, the top ops and kernels, the steps; each section the answer of the tool of the same name, names escaped
so that they render as plain text."""

from __future__ import annotations

from typing import Any

from api.mcp import tools
from api.mcp.bounds import human_ns
from api.state import AppState
from explorer.cli_output import markdown_table, md_code, md_text

TOP = 10


def run_markdown(state: AppState, ref: str) -> str:
    rec = tools.ready(state, ref)
    run = tools.run_summary(state, rec.id)
    s = run["summary"]
    parts = [f"# Run {md_code(run['name'], in_table=False)} ({md_text(run['id'])})", "",
             f"Span {human_ns(s['span_ns'])} ({s['span_ns']} ns), {s['slices']:,} slices.", ""]
    parts += _busy(tools.gaps(state, rec.id))
    parts += _table("Top ops by self device time", tools.ops_tool(state, rec.id)["rows"],
                    ("name", "calls", "self_device_ns", "self_cpu_ns", "device_pct"))
    parts += _table("Top kernels by total time", tools.kernels_tool(state, rec.id)["rows"],
                    ("name", "calls", "total_ns", "avg_ns", "device_pct"))
    steps = tools.steps_tool(state, rec.id)
    parts += _table(f"Steps ({steps['count']})", steps["steps"], ("name", "dur_ns", "busy_ns", "idle_ns"))
    return "\n".join(parts)


def _busy(breakdown: dict[str, Any]) -> list[str]:
    rows = [[d["device"], human_ns(d["busy_ns"]), f"{d['busy_pct']:.1f}%"] for d in breakdown["devices"]]
    gaps = breakdown["gaps"]
    out = ["## Device busy", "", markdown_table(("device", "busy", "busy %"), rows) if rows else "No device.", "",
           f"{gaps['count']:,} gaps between device executions, {human_ns(gaps['total_ns'])} in all.", ""]
    for g in gaps["largest"][:TOP]:
        out.append(f"- {human_ns(g['dur_ns'])} on {md_code(g['device'], in_table=False)} at {g['start']} ns: "
                   f"{md_text(g['cause'])} — {md_text(g['cause_detail'])}")
    return [*out, ""]


def _table(title: str, rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[str]:
    if not rows:
        return [f"## {title}", "", "None.", ""]
    cells = [[human_ns(r[k]) if k.endswith("_ns") else f"{r[k]:.1f}%" if k.endswith("pct") else str(r[k])
              for k in keys] for r in rows[:TOP]]
    more = f"\n\n{len(rows) - TOP:,} more: the `{title.split()[1]}` tool." if len(rows) > TOP else ""
    return [f"## {title}", "", markdown_table(keys, cells, [k == "name" for k in keys]) + more, ""]

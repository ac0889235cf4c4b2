"""The MCP server over an AppState: every ToolSpec of api/mcp/tools.py registered as a tool whose answer is bounded
(api/mcp/bounds.py) and whose errors are the API's typed errors as JSON, and a run's report as a Markdown resource.
Adding a tool is one ToolSpec in TOOLS (or in `extra`); nothing here knows a tool by name."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fastapi.exceptions import RequestValidationError

from api.mcp.bounds import bounded as bound_answer
from api.mcp.bounds import dumps
from api.mcp.tools import TOOLS, ToolSpec
from api.state import AppState
from explorer import __version__
from explorer.errors import ExplorerError

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.types import CallToolResult

log = logging.getLogger(__name__)
REPORT_URI = "run://{run}/report.md"
INSTRUCTIONS = ("Trace Explorer: ML profiler traces (PyTorch/Kineto, Neuron) as runs. Start with list_runs and "
                "run_summary, then gaps (is the device busy?), kernels and ops (what takes device time), steps, "
                "chain (who launched a kernel). Every answer is bounded: read its `truncated` lines and narrow. Times "
                "are integer ns (`*_ns`) with a `*_human` twin. The guide: docs/agents.md.")


def build_server(state: AppState, local: bool, extra: Iterable[ToolSpec] = ()) -> MCPServer:
    """The tools (those marked local_only only when `local`: a stdio server on the user's own machine) and the
    report resource, over `state`."""
    from mcp.server import MCPServer
    from mcp.types import ToolAnnotations

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    server: MCPServer = MCPServer("trace-explorer", version=__version__, instructions=INSTRUCTIONS,
                                  log_level="WARNING")
    root.handlers[:] = handlers  # the SDK configures the root logger: the process's own configuration is kept
    root.setLevel(level)
    for spec in (*TOOLS, *extra):
        if spec.local_only and not local:
            continue
        description = f"{inspect.getdoc(spec.fn)}\nHTTP twin: {spec.twin}. {BOUND_NOTE}"
        # every tool reads, except ingest, which adds a run (and reuses an identical one: idempotent)
        hints = ToolAnnotations(read_only_hint=not spec.local_only, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)
        server.add_tool(bind(spec, state), name=spec.name, description=description, annotations=hints,
                        structured_output=False)

    @server.resource(REPORT_URI, name="run_report", mime_type="text/markdown",
                     description="A run's report as Markdown: summary, device busy and gaps, top ops, kernels, steps")
    def report(run: str) -> str:
        from api.mcp.report_md import run_markdown

        return run_markdown(state, run)

    return server


BOUND_NOTE = ("Answers at most `limit` rows per list and `max_chars` characters; each cut is a `truncated` line "
              "saying how many more and how to narrow.")


def bind(spec: ToolSpec, state: AppState) -> Callable[..., CallToolResult]:
    """`spec.fn` with `state` bound, its signature (less `state`) the tool's input schema; the answer bounded and
    sent as JSON text and structured content; an ExplorerError an error result with its code."""
    from mcp.types import CallToolResult, TextContent

    @functools.wraps(spec.fn)
    def call(**kwargs: Any) -> CallToolResult:
        try:
            answer = spec.fn(state, **kwargs)
        except (ExplorerError, RequestValidationError) as exc:
            error = error_json(exc)
            return CallToolResult(content=[TextContent(type="text", text=dumps(error))], structured_content=error,
                                  is_error=True)
        out = bound_answer(answer, kwargs["limit"], kwargs["max_chars"], spec.narrow)
        return CallToolResult(content=[TextContent(type="text", text=dumps(out))], structured_content=out)

    signature = inspect.signature(spec.fn, eval_str=True)
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=list(signature.parameters.values())[1:], return_annotation=CallToolResult)
    del call.__wrapped__  # the schema is the signature above, not the function's
    return call


def error_json(exc: ExplorerError | RequestValidationError) -> dict[str, Any]:
    """The API's one error shape (api/errors.py): code, message, detail."""
    if isinstance(exc, ExplorerError):
        return {"error": {"code": exc.code, "message": exc.message, "detail": exc.detail}}
    message = "; ".join(str(e.get("msg", "")) for e in exc.errors())
    return {"error": {"code": "bad_request", "message": message, "detail": None}}

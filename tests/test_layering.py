"""Dependencies point one way (CONTRIBUTING.md, "Layers"): every module of explorer/ and api/ sits in one
layer and imports only its own layer and the layers below it. Imports are read from the source (ast), lazy
and TYPE_CHECKING imports included, so a function-local import cannot hide a cycle."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("explorer", "api")


@dataclass(frozen=True)
class Layer:
    name: str
    units: tuple[str, ...]  # explorer's direct children (module or subpackage), "explorer" itself, or "api"
    independent: bool = False  # its units may not import one another


# Lowest first: base <- model <- analysis <- ingest, store <- runs <- views <- entry <- api.
LAYERS: tuple[Layer, ...] = (
    Layer("base", ("explorer", "explorer.errors", "explorer.config", "explorer.theme", "explorer.native")),
    Layer("model", ("explorer.model",)),
    Layer("analysis", ("explorer.analysis",)),
    Layer("io", ("explorer.ingest", "explorer.store"), independent=True),
    Layer("runs", ("explorer.runs",)),
    Layer("views", ("explorer.views", "explorer.report")),
    Layer("entry", ("explorer.demo", "explorer.upload_client", "explorer.cli", "explorer.notebook", "explorer.cli_output",
                    "explorer.cli_tables")),
    Layer("api", ("api",)),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer.units}
INDEPENDENT = {unit for layer in LAYERS if layer.independent for unit in layer.units}


def unit_of(module: str) -> str:
    """The layering unit of a dotted module name: "api" for all of api/, else explorer's direct child."""
    parts = module.split(".")
    return "api" if parts[0] == "api" else ".".join(parts[:2])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    return imports_of(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every module `source` imports, as absolute names (relative imports resolved against `module`)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            names.add(".".join([*base, *([node.module] if node.module else [])]))
    return names


def layering_problem(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported` (both dotted module names), or None when it may."""
    if imported.split(".")[0] not in PACKAGES:
        return None
    mine, theirs = unit_of(importer), unit_of(imported)
    for unit in (mine, theirs):
        if unit not in RANK:
            return f"{unit} is in no layer: add it to LAYERS here and to CONTRIBUTING.md"
    if RANK[theirs] > RANK[mine]:
        return f"{mine} may not import the layer above it ({theirs})"
    if RANK[theirs] == RANK[mine] and mine != theirs and mine in INDEPENDENT:
        return f"{mine} may not import its sibling {theirs}"
    return None


def source_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_every_module_is_in_a_layer() -> None:
    assert [module_name(p) for p in source_files() if unit_of(module_name(p)) not in RANK] == []


@pytest.mark.parametrize("layer", [layer.name for layer in LAYERS])
def test_each_layer_imports_only_itself_and_below(layer: str) -> None:
    units = next(lay.units for lay in LAYERS if lay.name == layer)
    offenders = []
    for path in source_files():
        importer = module_name(path)
        if unit_of(importer) not in units:
            continue
        for imported in sorted(imported_modules(path)):
            problem = layering_problem(importer, imported)
            if problem:
                offenders.append(f"{path.relative_to(ROOT)} imports {imported}: {problem}")
    assert offenders == []


@pytest.mark.parametrize(("importer", "imported", "allowed"), [
    ("explorer.store.runs", "explorer.ingest.builder", False),  # siblings of the io layer
    ("explorer.ingest.builder", "explorer.store.runs", False),
    ("explorer.analysis.kernels", "explorer.store.runs", False),  # analysis sits below io
    ("explorer.analysis.timeline.index", "explorer.ingest.times", False),
    ("explorer.model.lanes", "explorer.analysis.chain", False),  # upwards
    ("explorer.views.render", "explorer.demo", False),
    ("explorer.runs.ingest", "explorer.views.ops", False),
    ("explorer.cli", "api.app", False),
    ("explorer.model.tables", "explorer.nowhere", False),  # a module in no layer
    ("explorer.analysis.timeline.index", "explorer.analysis.timeline.levels", True),  # within a package
    ("explorer.store.runs", "explorer.analysis.op_stats", True),  # io may call analysis's pure functions
    ("explorer.ingest.builder", "explorer.native.heap", True),
    ("explorer.analysis.op_stats", "explorer.errors", True),
    ("explorer.report.html", "explorer.views.ops", True),  # one layer, not independent
    ("explorer.report.html", "explorer.store.queries", True),
    ("api.routes.ops", "explorer.views.ops", True),
    ("explorer.ingest.chrome.decode", "numpy", True),
])
def test_layering_rule(importer: str, imported: str, allowed: bool) -> None:
    assert (layering_problem(importer, imported) is None) == allowed


def test_imports_are_read_whole() -> None:
    source = ("from . import runs\nfrom ..model.lanes import Lane\nimport numpy as np\n"
              "def f():\n    from explorer.analysis.ops import x\n")
    assert imports_of(source, "explorer.store.queries", is_package=False) == {
        "explorer.store", "explorer.model.lanes", "numpy", "explorer.analysis.ops"}
    assert imports_of("from .lanes import Lane\n", "explorer.model", is_package=True) == {"explorer.model.lanes"}
    assert module_name(ROOT / "explorer" / "model" / "__init__.py") == "explorer.model"
    assert module_name(ROOT / "explorer" / "store" / "runs.py") == "explorer.store.runs"


def test_contributing_states_the_same_layers() -> None:
    """CONTRIBUTING.md's layer table lists the layers of LAYERS, in order, with the same modules."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    rows = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| ") and "`" in line]
    stated = [(name.strip(), tuple(re.findall(r"`([a-z_.]+)`", units))) for name, units in rows]
    assert stated == [(layer.name, layer.units) for layer in LAYERS]


FORBIDDEN = {
    "explorer": {"api"},
    "explorer/model": {"api", "explorer.ingest", "explorer.store", "explorer.analysis", "explorer.cli"},
    "explorer/analysis": {"api", "explorer.store", "explorer.ingest", "explorer.cli"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in FORBIDDEN[package]):
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert offenders == []


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative): each an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return cycles


def test_no_two_modules_import_each_other() -> None:
    """No import circle anywhere in explorer/ and api/ (the jobs' queue and tasks were one: runs/jobs/fanout.py)."""
    modules = {module_name(p): p for p in source_files()}
    graph = {m: {i for i in imported_modules(p) if i in modules and i != m} for m, p in modules.items()}
    assert import_cycles(graph) == []
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# What api/ may import of explorer/ (LAYOUT.md): the page data (views, report), the run layer, and the base and
# model types; the command-line glue (`trace-explorer serve`, the client commands, `mcp`) the entry modules too.
# Never ingest, store or analysis directly: a route that needs them asks a view or a Run.
API_REACH = ("explorer.views", "explorer.report", "explorer.runs", "explorer.model", "explorer.native",
             "explorer.errors", "explorer.config")
CLI_GLUE = ("api/cli.py", "api/client_commands.py", "api/launch.py", "api/mcp/")
ENTRY = ("explorer.cli", "explorer.cli_output", "explorer.cli_tables", "explorer.demo", "explorer.upload_client")


def api_reach_problem(path: str, module: str) -> str | None:
    """Why api/`path` may not import the explorer module `module`, or None when it may."""
    if module == "explorer" or not module.startswith("explorer.") or unit_of(module) in API_REACH:
        return None
    if unit_of(module) in ENTRY and path.startswith(CLI_GLUE):
        return None
    return f"api/ reaches {module} past the views and the run layer"


def test_api_reaches_the_core_only_through_views_and_runs() -> None:
    offenders = [f"{p.relative_to(ROOT)}: {problem}" for p in sorted((ROOT / "api").rglob("*.py"))
                 for m in sorted(imported_modules(p))
                 if (problem := api_reach_problem(str(p.relative_to(ROOT)), m))]
    assert offenders == []


@pytest.mark.parametrize(("path", "module", "allowed"), [
    ("api/routes/ops.py", "explorer.views.ops", True),
    ("api/routes/ops.py", "explorer.runs.run", True),
    ("api/routes/ops.py", "explorer.store.queries", False),
    ("api/routes/timeline.py", "explorer.analysis.timeline.index", False),
    ("api/app.py", "explorer.ingest.limits", False),
    ("api/cli.py", "explorer.cli", True),
    ("api/routes/runs.py", "explorer.cli", False),
])
def test_api_reach_rule(path: str, module: str, allowed: bool) -> None:
    assert (api_reach_problem(path, module) is None) == allowed

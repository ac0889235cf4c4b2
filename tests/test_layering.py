"""Dependencies point one way (STYLE.md): explorer/ never imports api/; model imports nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "explorer": {"api"},
    "explorer/model": {"api", "explorer.ingest", "explorer.store", "explorer.analysis", "explorer.cli"},
    "explorer/analysis": {"api", "explorer.store", "explorer.ingest", "explorer.cli"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if any(module == f or module.startswith(f + ".") for f in FORBIDDEN[package]):
                offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert offenders == []

"""One way for a command to print a table: a rich table (the default), JSON rows with stable field names (--json),
or a Markdown table (--markdown); names from traces are printed as plain text in all three (docs/cli-output.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "json", "markdown")
MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


@dataclass(frozen=True)
class Column:
    """A table column: its header, and the text of its cell for a row (the JSON output has the row itself)."""

    header: str
    cell: Callable[[Any], str]  # a row (a dict, or a TypedDict of the API's shapes) -> its cell
    name: bool = False  # a name from the trace: a code span in Markdown, nothing in it interpreted


def md_text(value: object) -> str:
    """`value` as Markdown that renders as exactly its text: markup characters escaped, newlines as spaces (a
    name `<script>` or `[bold]x` stays that text in any renderer)."""
    return MD_SPECIAL.sub(r"\\\1", " ".join(str(value).splitlines()))


def md_code(value: object, in_table: bool = True) -> str:
    """`value` as a Markdown code span (nothing inside one is markup), fenced with more backticks than it holds;
    in a table `|` escaped, which GitHub's tables need even there."""
    text = " ".join(str(value).splitlines())
    text = text.replace("|", "\\|") if in_table else text
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], names: Sequence[bool] = ()) -> str:
    """A Markdown table; the columns flagged in `names` as code spans, every other cell escaped."""
    flags = list(names) + [False] * (len(headers) - len(names))
    lines = ["| " + " | ".join(md_text(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_code(c) if f else md_text(c) for c, f in zip(row, flags, strict=True)) + " |"
              for row in rows]
    return "\n".join(lines)


def format_options(command: Any) -> Any:
    """--json and --markdown, as one `fmt` parameter (table, json or markdown)."""
    command = click.option("--markdown", "fmt", flag_value="markdown",
                           help="Print a Markdown table (names escaped: they render as plain text)")(command)
    return click.option("--json", "fmt", flag_value="json", help="Print JSON rows (field names: docs/cli-output.md)")(
        click.option("--table", "fmt", flag_value="table", default=True, hidden=True)(command))


def emit(out: Console, fmt: str, rows: Sequence[Any], columns: Sequence[Column], title: str = "") -> None:
    """Print `rows` as `fmt`: JSON prints the rows whole; table and Markdown the columns' cells."""
    if fmt == "json":
        out.print_json(json.dumps(list(rows)))
    elif fmt == "markdown":
        text = (f"### {md_text(title)}\n\n" if title else "") + markdown_table(
            [c.header for c in columns], [[c.cell(r) for c in columns] for r in rows], [c.name for c in columns])
        out.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        table = Table(*(c.header for c in columns), title=title or None)
        for r in rows:
            table.add_row(*(c.cell(r) for c in columns))
        out.print(table)

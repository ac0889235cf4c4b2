"""The README and docs/ as a user reads them: every `trace-explorer` command in their code blocks names a real
command and only options that command's `--help` lists (click's own command tree, `api.cli.main`), the README
stays short, its first screen has the install, open and ssh lines, and relative links point at files."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from api.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOC_FILES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 300
FIRST_SCREEN = 60
# written by another part of issue 36's work; linked before it lands (remove once docs/security.md exists)
PENDING_LINKS = {"docs/security.md"}

FENCE = re.compile(r"^\s*```")
# where one shell command ends and the next begins (a pipe is kept when an option follows it: `[--json | --md]`)
SEPARATORS = {"&&", "||", ";", ">", ">>", "2>", "<", ")", "$("}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block, continuation lines (`\\`) joined."""
    out: list[tuple[int, str]] = []
    inside, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def tokens(line: str) -> list[str]:
    """The line's shell words, its comment dropped; `$(`, `(` and `)` made words of their own."""
    spaced = line.replace("$(", " $( ").replace(")", " ) ")
    lexer = shlex.shlex(spaced, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote in a prose-like line: fall back to plain words
        return spaced.split("#", 1)[0].split()


def invocations(line: str) -> list[list[str]]:
    """The argument lists of each `trace-explorer ...` command on a line (what follows the program's name)."""
    words = tokens(line)
    found: list[list[str]] = []
    for i, word in enumerate(words):
        if Path(word).name != "trace-explorer":
            continue
        before = words[:i]
        cut = max((j for j, w in enumerate(before) if w in SEPARATORS or w == "|"), default=-1)
        if not all(ASSIGNMENT.match(w) for w in before[cut + 1:]):
            continue  # not in a command's place: `cd trace-explorer`, a folder name, prose
        args: list[str] = []
        for j, w in enumerate(words[i + 1:], start=i + 1):
            nxt = words[j + 1] if j + 1 < len(words) else ""
            if w in SEPARATORS or (w == "|" and not nxt.startswith("-")):
                break
            if w == "|":
                continue
            args.append(w)
        found.append(args)
    return found


def synopsis_args(args: list[str]) -> list[str]:
    """A usage line's words as arguments: `[--port 8000]` -> `--port 8000`, `PATH...` -> `PATH`."""
    out = []
    for word in args:
        word = word.strip("[]").removesuffix("...").strip("[]")
        if word:
            out.append(word)
    return out


def check_invocation(args: list[str]) -> str | None:
    """None when `trace-explorer ARGS` names real (sub)commands and only options their `--help` lists."""
    args = synopsis_args(args)
    command: click.Command = main
    path = ["trace-explorer"]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        name = args.pop(0)
        sub = command.commands.get(name)
        if sub is None:
            return f"`{' '.join(path)} {name}`: no such command (known: {', '.join(sorted(command.commands))})"
        command, path = sub, [*path, name]
    if isinstance(command, click.Group) and not args:
        return None  # `trace-explorer` alone, or `trace-explorer db`: prints the help
    with click.Context(command, info_name=" ".join(path)) as ctx:
        listed = {opt for param in command.get_params(ctx) if isinstance(param, click.Option)
                  for opt in (*param.opts, *param.secondary_opts)}
        parser = command.make_parser(ctx)
        try:
            parser.parse_args(list(args))
        except click.NoSuchOption as exc:
            return f"`{' '.join(path)}`: no option {exc.option_name} (its --help lists {', '.join(sorted(listed))})"
        except click.UsageError:
            return None  # a missing value in a usage line (`[--json | --markdown]` cut short) is not our concern
    return None


def commands_in(path: Path) -> list[tuple[int, list[str]]]:
    return [(number, args) for number, line in code_lines(path.read_text()) for args in invocations(line)]


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_is_valid(doc: Path) -> None:
    found = commands_in(doc)
    problems = [f"{doc.name}:{number}: {msg}" for number, args in found
                if (msg := check_invocation(args)) is not None]
    assert not problems, "\n".join(problems)


def test_the_readme_shows_commands() -> None:
    """The check above is not vacuous: the README's blocks hold commands, serve and ingest among them."""
    names = {args[0] for _, args in commands_in(README) if args}
    assert {"serve", "ingest", "check", "report", "export"} <= names


@pytest.mark.parametrize(("line", "problem"), [
    ("trace-explorer serve --port 8000", None),
    ("trace-explorer serve --bogus 1", "no option --bogus"),
    ("trace-explorer nosuch RUN", "no such command"),
    ("trace-explorer db upgrade --catalog-url URL", None),
    ("trace-explorer db downgrade", "no such command"),
    ("trace-explorer ops RUN --sort -self_cpu_ns --limit N", None),  # a value that looks like an option
    ("trace-explorer ops RUN [--view operators|python|all] [--json]", None),
    ("trace-explorer check A B [--json | --markdown]", None),
    ("trace-explorer check A B [--json | --markdwn]", "no option --markdwn"),
    ("RUN=$(trace-explorer runs --json | python -c 'import json' -x)", None),  # the pipe ends the command
    (".venv/bin/trace-explorer report RUN -o r.html && .venv/bin/trace-explorer serve --prot 1", "no option --prot"),
    ("trace-explorer check A B --markdown >> \"$GITHUB_STEP_SUMMARY\"", None),
    ("trace-explorer serve \\\n  --watch DIR", None),
    ("trace-explorer serve \\\n  --wach DIR", "no option --wach"),
    ("cd trace-explorer && make run", None),
])
def test_the_checker(line: str, problem: str | None) -> None:
    """The checker itself: it accepts what click accepts and names what click would refuse."""
    found = commands_in_text(f"```sh\n{line}\n```\n")
    messages = [msg for args in found if (msg := check_invocation(args)) is not None]
    if problem is None:
        assert messages == []
    else:
        assert len(messages) == 1 and problem in messages[0], messages


def commands_in_text(text: str) -> list[list[str]]:
    return [args for _, line in code_lines(text) for args in invocations(line)]


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_first_screen_has_install_open_and_ssh() -> None:
    """What a new user needs is on the first screen: an install command, the command that opens or serves a
    trace, and the ssh tunnel line, each inside a code block."""
    head = README.read_text().splitlines()[:FIRST_SCREEN]
    code = "\n".join(line for _, line in code_lines("\n".join(head)))
    assert re.search(r"^make run\b|pip install \.", code, re.M), "no install command in the first screen"
    assert re.search(r"\btrace-explorer (serve|open)\b", code), "no `trace-explorer serve/open` in the first screen"
    assert re.search(r"^ssh -L \d+:localhost:\d+ ", code, re.M), "no `ssh -L` line in the first screen"


def test_readme_installs_only_what_exists() -> None:
    """No install from a package index the project is not published on, and no placeholder clone URL."""
    text = README.read_text()
    assert not re.search(r"pip install\s+['\"]?trace-explorer", text)
    assert "git clone <" not in text


def test_the_rmsnorm_figure_says_where_it_comes_from() -> None:
    text = README.read_text()
    if "2,355" in text:
        paragraph = next(p for p in text.split("\n\n") if "2,355" in p)
        assert "fixture" in paragraph and "not a measurement" in paragraph


LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def anchors(text: str) -> set[str]:
    """The heading anchors GitHub makes of a Markdown text's headings (outside code blocks): lower case,
    punctuation but `-` and `_` dropped, spaces to `-`."""
    found, inside = set(), False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside and re.match(r"#{1,6} ", line):
            found.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return found


def test_anchors() -> None:
    text = "# Title\n\n```sh\n# a comment\n```\n\n## Issue 15's targets: ingest (speed)\n### `serve --watch`\n"
    assert anchors(text) == {"title", "issue-15s-targets-ingest-speed", "serve---watch"}


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    """Every relative link points at a file, and its #anchor (when it has one) at a heading of that file."""
    missing = []
    for target, anchor in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        resolved = (doc.parent / target).resolve() if target else doc
        if str(resolved.relative_to(ROOT)) in PENDING_LINKS and not resolved.exists():
            continue
        if not resolved.exists():
            missing.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            missing.append(f"{target}#{anchor}")
    assert not missing, f"{doc.name} links to what is not there: {missing}"

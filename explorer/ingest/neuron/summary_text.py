"""Parser for `neuron-profile view --output-format summary-text` (and `neuron-explorer view ...`) output: per
profile a header line (its id) and one `key value` line per Summary metric, often pasted with the shell prompt
and `WARN[0000]` log lines around it. Each profile becomes a device profile holding only a `Summary` table, typed
by the published schema (neuron_schema.py); keys the schema does not know are kept, typed by their text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.neuron.device import device_state
from explorer.model.device import DeviceProfile
from explorer.model.neuron_schema import fields_of

SUMMARY_TEXT = "summary-text"  # the profile's `source` suffix, and how the page tells a Summary-only profile
MIN_KNOWN_LINES = 3  # lines naming a published Summary field that make a text file summary-text
_METRIC = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*[:=]?\s+(\S+)\s*$")
_HEADER = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.@+-]*)\s*:?\s*$")
_LOG = re.compile(r"^\s*(WARN|INFO|ERRO|ERROR|DEBU|DEBUG|TRAC|FATA|PANI)(\[\S*\]|:)")
_PROMPT = re.compile(r"(^\s*[$#>%]\s)|(\$\s+\S)|(^\s*\(\S+\)\s)|(^\S+@\S+[:~])|(^(PS )?[A-Za-z]:\\[^>]*>)")
_NEFF_ARG = re.compile(r"(?:-n|--neff(?:-path)?)[\s=]+(\S+?)\.neff\b")
_INT = re.compile(r"^[+-]?\d+$")
_NULLS = frozenset({"none", "null", "nan", "n/a", "na", "-", ""})
SUMMARY_FIELDS = {f.name: f for f in fields_of("Summary")}


def looks_like_summary_text(head: bytes) -> bool:
    """Whether a text file's first bytes hold at least MIN_KNOWN_LINES `key value` lines whose keys are
    published Summary fields (a log or any other text names them rarely, and never three times)."""
    text = head.decode("utf-8", "replace")
    known = 0
    for line in text.splitlines():
        m = _METRIC.match(line)
        if m and m.group(1) in SUMMARY_FIELDS:
            known += 1
            if known >= MIN_KNOWN_LINES:
                return True
    return False


@dataclass
class _Profile:
    neff: str  # the NEFF the shell command before it named ("" when none)
    header: str = ""  # the profile id its header line gave ("" when none)
    values: dict[str, str] = field(default_factory=dict)  # key -> value text, in file order

    def name(self, default: str, alone: bool) -> str:
        """The NEFF's name, else the file's (when it holds this profile alone), else the header's id."""
        return self.neff or (default if alone else "") or self.header or default


@dataclass
class SummaryText:
    """What one file held: its profiles, and the lines that were neither metric, header, prompt nor log."""

    profiles: list[_Profile]
    ignored: int = 0
    duplicated: list[str] = field(default_factory=list)


def read_summary_text(text: str) -> SummaryText:
    """Split the text into profiles: a header line or a shell prompt starts the next one (a prompt naming a
    `.neff` names it); `key value` lines fill the current one; log lines and blank lines are skipped."""
    out = SummaryText([])
    current: _Profile | None = None
    pending_name = ""
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.rstrip("\r")
        if not line.strip() or _LOG.match(line):
            continue
        if _PROMPT.search(line) and not _METRIC.match(line):
            neff = _NEFF_ARG.search(line)
            pending_name = PurePosixPath(neff.group(1)).name if neff else ""
            current = None
            continue
        metric = _METRIC.match(line)
        if metric:
            if current is None:
                current, pending_name = _Profile(pending_name), ""
                out.profiles.append(current)
            key, value = metric.groups()
            if key in current.values:
                out.duplicated.append(key)
            current.values[key] = value
            continue
        header = _HEADER.match(line)
        if header:
            current, pending_name = _Profile(pending_name, header.group(1)), ""
            out.profiles.append(current)
            continue
        out.ignored += 1
    out.profiles = [p for p in out.profiles if p.values]
    return out


def typed_value(key: str, text: str) -> tuple[Any, pa.DataType, str]:
    """A value as the schema types its field (integer or float); an unknown key's value as its text reads
    (integer, float, else text). Returns (value, arrow type, problem) with value None and a problem when a
    published field's text is not of its type; "None"/"nan"/"N/A" are null without a problem."""
    spec = SUMMARY_FIELDS.get(key)
    if spec is None and text.strip().lower() in _NULLS:
        return None, pa.float64(), ""
    kind = spec.type if spec else ("i64" if _INT.match(text) else "f64" if _number(text) is not None else "str")
    arrow = spec.arrow_type if spec else {"i64": pa.int64(), "f64": pa.float64(), "str": pa.string()}[kind]
    if text.strip().lower() in _NULLS and kind != "str":
        return None, arrow, ""
    if kind == "str":
        return text, arrow, ""
    number = _number(text)
    if number is None:
        return None, arrow, f"{key} {text!r} is not a number"
    if kind.startswith("i"):
        if number != number.to_integral_value():
            return None, arrow, f"{key} {text!r} is not an integer"
        return int(number), arrow, ""
    return float(text), arrow, ""


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def summary_table(values: dict[str, str]) -> tuple[pa.Table, list[str]]:
    """One Summary row from the profile's key/value texts, and the problems found."""
    arrays, names, problems = [], [], []
    for key, text in values.items():
        value, arrow, problem = typed_value(key, text)
        if problem:
            problems.append(problem)
        names.append(key)
        arrays.append(pa.array([value], arrow))
    return pa.Table.from_arrays(arrays, names=names), problems


def total_ns(values: dict[str, str]) -> int:
    """`total_time` (seconds, as written) in integer ns, 0 when absent or unreadable."""
    number = _number(values.get("total_time", ""))
    return max(0, round(number * 1_000_000_000)) if number is not None else 0


def parse_summary_text(data: bytes, filename: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """Every profile of the file as a Summary-only device profile, kept until the upload's device profiles
    are collected (neuron_device.collect_device_profiles)."""
    base = PurePosixPath(filename).name
    default = base.split(".", 1)[0] or "summary"
    read = read_summary_text(data.decode("utf-8", "replace"))
    if not read.profiles:
        raise BadTrace(filename, "summary-text with no `key value` lines")
    state = device_state(builder)
    problems: list[str] = []
    for i, p in enumerate(read.profiles):
        table, found = summary_table(p.values)
        problems += found
        where = f"profile {p.header}" if p.header else f"#{i + 1}" if len(read.profiles) > 1 else ""
        source = f"{filename} ({SUMMARY_TEXT}{', ' + where if where else ''})"
        state.summaries.append(DeviceProfile(profile_id="", name=p.name(default, len(read.profiles) == 1), source=source, tables={"Summary": table},
                                             start_ns=0, end_ns=total_ns(p.values)))
    if problems:
        builder.warn("summary_text_value", f"{filename}: values not of their published type were stored as null: "
                     + "; ".join(problems[:10]), len(problems), filename)
    if read.ignored:
        builder.warn("summary_text_lines", f"{filename}: lines that are neither a metric, a profile header, a "
                     "shell prompt nor a log line were skipped", read.ignored, filename)
    if read.duplicated:
        builder.warn("summary_text_duplicate", f"{filename}: keys given twice in one profile (the last value "
                     f"is kept): {', '.join(sorted(set(read.duplicated))[:10])}", len(read.duplicated), filename)
    unknown = sorted({k for p in read.profiles for k in p.values if k not in SUMMARY_FIELDS})
    return {"format": "neuron_summary_text", "profiles": [p.name(default, len(read.profiles) == 1) for p in read.profiles],
            "unknown_keys": unknown}

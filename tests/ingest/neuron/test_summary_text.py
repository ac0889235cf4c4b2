"""summary-text files (`neuron-profile view --output-format summary-text`) as fixtures written from the published
Summary fields, pasted as users paste them: the shell prompt, `WARN[0000]`/`INFO` lines, Windows line ends, two
profiles in one file. Every stored value is checked against a plain reading of the file done here (split lines,
`int()` / `float()` by the published type), never against the parser's own output."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from explorer.ingest.detect import Format, detect_format
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "summary_text"
FILES = ("two_kernels.txt", "matmul_tiled.txt", "rmsnorm_nki.txt")
# The fixtures' published Summary fields of integer type (PROFILE_SCHEMA.md, Summary: "integer (int64)");
# every other published field in them is "number (float)".
INTEGER_FIELDS = {"activate_instruction_count", "dma_transfer_count", "dma_transfer_total_bytes", "hardware_flops",
                  "hbm_read_bytes", "hbm_write_bytes", "vector_engine_instruction_count", "transpose_flops",
                  "spill_reload_bytes"}
FLOAT_FIELDS = {"dma_active_time", "dma_active_time_percent", "dma_transfer_average_bytes",
                "gpsimd_engine_active_time_percent", "mbu_estimated_percent", "mfu_estimated_percent",
                "scalar_engine_active_time_percent", "software_dynamic_dma_active_time_percent",
                "sync_engine_active_time_percent", "tensor_engine_active_time", "tensor_engine_active_time_percent",
                "total_active_time_percent", "total_time", "vector_engine_active_time_percent",
                "hfu_estimated_percent", "mm_arithmetic_intensity", "peak_flops_bandwidth_ratio",
                "mfu_inst_estimated_percent"}
UNKNOWN_FIELDS = {"instance_type", "profiler_version", "throttle_active_time_percent",
                  "throttle_avg_util_limit_nc0_percent"}


def plain_profiles(path: Path) -> list[dict[str, str]]:
    """The file read by hand: a line naming a `.neff` or a lone number starts a profile; a line of exactly two
    fields whose first is a lower-case name is a metric; everything else is noise."""
    profiles: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in path.read_bytes().decode().replace("\r\n", "\n").split("\n"):
        parts = line.split()
        if ".neff" in line or (len(parts) == 1 and parts[0].isdigit()):
            current = None if ".neff" in line else current
            if len(parts) == 1:
                current = {}
                profiles.append(current)
            continue
        if len(parts) == 2 and parts[0].replace("_", "a").isalnum() and parts[0].islower():
            if current is None:
                current = {}
                profiles.append(current)
            current[parts[0]] = parts[1]
    return profiles


def expected_value(key: str, text: str) -> Any:
    if text == "None":
        return None
    if key in INTEGER_FIELDS:
        return int(text)
    if key in FLOAT_FIELDS:
        return float(text)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def test_the_fixtures_cover_what_users_paste() -> None:
    raw = {name: (FIXTURES / name).read_bytes() for name in FILES}
    assert b"WARN[0000]" in raw["two_kernels.txt"] and b"INFO[0000]" in raw["two_kernels.txt"]
    assert b"$ neuron-profile view" in raw["two_kernels.txt"] and b"\r\n" in raw["matmul_tiled.txt"]
    assert len(plain_profiles(FIXTURES / "two_kernels.txt")) == 2
    keys = {k for name in FILES for p in plain_profiles(FIXTURES / name) for k in p}
    assert keys == INTEGER_FIELDS | FLOAT_FIELDS | UNKNOWN_FIELDS


@pytest.mark.parametrize("name", FILES)
def test_detected_by_content(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    assert detect_format(data) is Format.NEURON_SUMMARY_TEXT
    assert detect_format(data.replace(b"\n", b"\r\n")) is Format.NEURON_SUMMARY_TEXT


@pytest.mark.parametrize("text", [b"hello world\nthis is a note\n", b"total_time 1\nhardware_flops 2\n",
                                  b"2026-01-01 INFO total_time was long\n"])
def test_other_text_is_not_summary_text(text: bytes) -> None:
    assert detect_format(text) is not Format.NEURON_SUMMARY_TEXT


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    return RunStore(tmp_path_factory.mktemp("summary_text") / "data")


@pytest.mark.parametrize("name", FILES)
def test_every_value_is_the_files_and_typed_by_the_schema(store: RunStore, name: str) -> None:
    run = ingest_paths(store, [FIXTURES / name], name)
    assert run.status == "ready"
    profiles = sorted(store.device_profiles(run.id).to_pylist(), key=lambda r: r["source"])
    expected = plain_profiles(FIXTURES / name)
    assert len(profiles) == len(expected)
    by_source = sorted(profiles, key=lambda r: r["end_ns"])
    for want in expected:
        total = want["total_time"]
        row = next(p for p in by_source if p["end_ns"] == round(float(total) * 1e9))
        assert row["tables"] == ["Summary"]
        table = store.device_table(run.id, row["profile_id"], "Summary")
        stored = table.to_pylist()[0]
        for key, text in want.items():
            assert stored[key] == expected_value(key, text), key
            kind = table.schema.field(key).type
            if key in INTEGER_FIELDS:
                assert kind == pa.int64(), key
            elif key in FLOAT_FIELDS:
                assert kind == pa.float64(), key
        assert set(want) <= set(table.column_names)


def test_profiles_are_named_by_their_neff_else_their_file_else_their_header(store: RunStore,
                                                                            tmp_path: Path) -> None:
    run = ingest_paths(store, [FIXTURES / "two_kernels.txt", FIXTURES / "matmul_tiled.txt"], "names")
    rows = store.device_profiles(run.id).to_pylist()
    assert sorted(r["name"] for r in rows) == ["matmul_tiled", "vector_add_fd1k", "vector_add_fd2k"]
    sources = {r["name"]: r["source"] for r in rows}
    assert "1847205591382741102" in sources["vector_add_fd2k"] and "summary-text" in sources["vector_add_fd2k"]
    assert "9914203380155526001" in sources["matmul_tiled"]
    two = tmp_path / "two.txt"  # two headers, no shell prompt: the header ids name them
    two.write_text("111\n total_time 1e-05\n hbm_read_bytes 1\n hardware_flops 2\n222:\n total_time 2e-05\n")
    rows = store.device_profiles(ingest_paths(store, [two], "headers").id).to_pylist()
    assert sorted(r["name"] for r in rows) == ["111", "222"]


def test_a_bad_number_is_a_warning_and_a_null(store: RunStore, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("total_time 1.5e-05\nhardware_flops 12.5\nhbm_read_bytes lots\ndma_transfer_count 7\n")
    run = ingest_paths(store, [path], "bad")
    row = store.device_table(run.id, store.device_profiles(run.id).column("profile_id")[0].as_py(),
                             "Summary").to_pylist()[0]
    assert row["hardware_flops"] is None and row["hbm_read_bytes"] is None and row["dma_transfer_count"] == 7
    warning = {w["code"]: w for w in store.run_json(run.id)["summary"]["warnings"]}["summary_text_value"]
    assert warning["count"] == 2 and "stored as null" in warning["message"]


@pytest.mark.parametrize("name", FILES)
def test_the_files_percent_fields_are_fractions_of_one(name: str) -> None:
    """summary-text prints the Summary's `*_percent` fields as the export stores them, fractions of 1; where
    a file also gives the time, the share is that time over total_time."""
    for profile in plain_profiles(FIXTURES / name):
        shares = {k: Decimal(v) for k, v in profile.items() if k.endswith("_percent") and v != "None"}
        assert shares and all(0 <= v <= 1 for v in shares.values()), shares
        for key, share in shares.items():
            time = profile.get(key.removesuffix("_percent"))
            if time is not None:
                assert share == pytest.approx(Decimal(time) / Decimal(profile["total_time"]), rel=Decimal("1e-4")), key

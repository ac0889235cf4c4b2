"""The device peak table against the figures its sources print, copied here as the documents give them: NVIDIA
prints tensor-core rates with 2:4 sparsity (the dense rate is half: "Specifications 1/2 lower without sparsity"),
AMD, the MI300X's tensor rates both ways (the dense ones are taken), AWS dense rates. A row that drifts from its
source, or a source that is not cited, fails here."""

from __future__ import annotations

from fractions import Fraction

import pytest

from explorer.analysis.advice.peaks import PEAKS, find_peak

T, G = 10**12, 10**9
SPARSE = Fraction(1, 2)  # NVIDIA's starred figures: with sparsity
DENSE = Fraction(1)
# model -> (BF16/FP16 tensor TFLOPS, scale, TF32 tensor TFLOPS, scale, FP32 TFLOPS, memory bytes/s, a source word)
DATASHEETS: dict[str, tuple[str, Fraction, str, Fraction, str, int | None, str]] = {
    "A100 SXM4 80GB": ("624", SPARSE, "312", SPARSE, "19.5", 2_039 * G, "A100"),
    "A100 40GB": ("624", SPARSE, "312", SPARSE, "19.5", 1_555 * G, "A100"),
    "A100": ("624", SPARSE, "312", SPARSE, "19.5", None, "A100"),
    "H100 SXM": ("1979", SPARSE, "989", SPARSE, "67", 3_350 * G, "H100"),
    "H100 PCIe": ("1513", SPARSE, "756", SPARSE, "51", 2_000 * G, "H100"),
    "H100 NVL": ("1671", SPARSE, "835", SPARSE, "60", 3_900 * G, "H100"),
    "H200 SXM": ("1979", SPARSE, "989", SPARSE, "67", 4_800 * G, "H200"),
    "B200": ("4500", SPARSE, "2200", SPARSE, "75", 7_700 * G, "B200"),
    "MI250X": ("383", DENSE, "95.7", DENSE, "47.9", 3_277 * G, "MI250X"),  # TF32 column: the FP32 matrix rate
    "MI250": ("362.1", DENSE, "90.5", DENSE, "45.3", 3_277 * G, "MI250"),
    "MI300X": ("1307.4", DENSE, "653.7", DENSE, "163.4", 5_300 * G, "MI300X"),
    "Trainium (Trn1)": ("190", DENSE, "190", DENSE, "47.5", 820 * 2**30, "Trainium"),
    "Trainium2 (Trn2)": ("667", DENSE, "667", DENSE, "181", 2_900 * G, "Trainium2"),
}


def flops(tflops: str, scale: Fraction) -> int:
    value = Fraction(tflops) * scale * T
    assert value.denominator == 1
    return int(value)


@pytest.mark.parametrize("row", PEAKS, ids=lambda r: r.model)
def test_each_row_is_its_source_figures(row: object) -> None:
    from explorer.analysis.advice.peaks import DevicePeak

    assert isinstance(row, DevicePeak)
    bf16, bs, tf32, ts, fp32, hbm, word = DATASHEETS[row.model]
    assert row.bf16_flops == flops(bf16, bs)
    assert row.tf32_flops == flops(tf32, ts)
    assert row.fp32_flops == flops(fp32, DENSE)
    assert row.hbm == hbm
    assert word in row.source


def test_every_source_figure_has_its_row() -> None:
    assert sorted(DATASHEETS) == sorted(r.model for r in PEAKS)


@pytest.mark.parametrize(("name", "model"), [
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"), ("NVIDIA A100-PG509-200", "A100"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA B200", "B200"), ("AMD Instinct MI250X", "MI250X"),
    ("AMD Instinct MI300X", "MI300X"), ("trn1.32xlarge", "Trainium (Trn1)"), ("trn2.48xlarge", "Trainium2 (Trn2)"),
])
def test_device_names_find_their_row(name: str, model: str) -> None:
    peak = find_peak(name)
    assert peak is not None and peak.model == model


@pytest.mark.parametrize("name", ["Tesla V100-SXM2-32GB", "AMD Radeon Graphics", "NVIDIA GeForce RTX 4090", ""])
def test_a_device_no_row_matches_has_no_peak(name: str) -> None:
    assert find_peak(name) is None

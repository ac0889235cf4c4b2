"""Known misreadings of the product, measured by bench/truth.py: (case id, check) -> the discrepancy
(reader vs product). Each is a strict xfail in test_truth.py: delete the entry when the product is fixed."""

KNOWN: dict[tuple[str, str], str] = {
}

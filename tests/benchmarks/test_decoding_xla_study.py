"""benchmarks/decoding_xla_study.py runs end to end, every decoder giving the dynamic one's ids (the fixed-shape
search itself is tested in tests/decoding)."""

import pytest

from tests.benchmarks.test_translation_study_benchmarks import run


@pytest.mark.slow
def test_the_xla_study_times_three_decoders_with_equal_ids():
    rows = run("decoding_xla_study.py", "--batch-sizes", "4", "--batches", "2", "--rounds", "1")
    timed = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if row.startswith("| 4 |")]
    assert [cells[1] for cells in timed[:3]] == ["dynamic (kzoo.decoding.beam_search)", "fixed shapes",
                                                "fixed shapes, XLA"]
    for cells in timed[:3]:
        assert cells[5] == "8/8" and float(cells[2]) > 0  # every decoder found the dynamic one's ids

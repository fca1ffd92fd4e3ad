"""benchmarks/translation_decoding_study.py and benchmarks/ctranslate2_alone.py run end to end on a few sentences."""

import os
import subprocess
import sys

import pytest

from tests.train.worker_processes import REPOSITORY


def run(script, *args):
    completed = subprocess.run([sys.executable, f"benchmarks/{script}", *args], cwd=REPOSITORY,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return [line for line in completed.stdout.splitlines() if line.startswith("| ") and "---" not in line]


@pytest.mark.slow  # about a minute: nine decodings of the shipped translator; `make test-slow` runs it
def test_the_decoding_study_scores_every_setting_of_its_grid_on_val():
    sys.path.insert(0, str(REPOSITORY / "benchmarks"))
    from translation_decoding_study import GRID

    rows = run("translation_decoding_study.py", "--sentences", "24")
    scored = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not row.startswith("| decoding")]
    assert [cells[0] for cells in scored[: len(GRID)]] == [
        "greedy" if beam == 1 else f"beam {beam}, α {alpha}" for beam, alpha in GRID]
    for cells in scored[: len(GRID)]:
        assert 15 < float(cells[1]) < 70 and 40 < float(cells[2]) < 90  # BLEU and chrF of the shipped weights


@pytest.mark.slow
def test_ctranslate2_alone_times_float32_and_int8():
    pytest.importorskip("ctranslate2")
    rows = run("ctranslate2_alone.py", "--sentences", "16", "--rounds", "1", "--singles", "2")
    timed = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if row.startswith("| CTranslate2")]
    assert [cells[0] for cells in timed[:2]] == ["CTranslate2 float32, alone", "CTranslate2 int8, alone"]
    for cells in timed[:2]:
        assert float(cells[1]) > 0 and float(cells[3]) > 0  # sentences/s, latency

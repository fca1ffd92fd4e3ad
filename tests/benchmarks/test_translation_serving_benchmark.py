"""benchmarks/bench_translation_serving.py runs end to end with --quick (16 sentences, one round)."""

import os
import re
import subprocess
import sys

import pytest

from tests.train.worker_processes import REPOSITORY

pytest.importorskip("ctranslate2")


@pytest.mark.slow  # about ten minutes: twelve contenders load and compile the warm-up shapes; `make test-slow` runs it
def test_the_translation_serving_benchmark_runs_quick():
    completed = subprocess.run(
        [sys.executable, "benchmarks/bench_translation_serving.py", "--quick"], cwd=REPOSITORY,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, capture_output=True, text=True, timeout=1500)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| kzoo") or line.startswith("| CTr")]
    names = [row.split(" | ")[0][2:] for row in rows]
    # the version before the newest, timed with its own settings, which its row names
    older = sorted(int(p.name) for p in (REPOSITORY / "saved_models" / "transformer_multi30k_en_de").iterdir()
                   if p.name.isdigit())[-2]
    assert re.fullmatch(rf"kzoo SavedModel, version {older} \(.*beam \d+, length penalty [\d.]+\), TF Python",
                        names[1]), names[1]
    assert names[:1] + names[2:] == [
        "kzoo SavedModel, TF Python",
        "kzoo SavedModel, same weights without XLA or lanes, TF Python",
        "kzoo SavedModel int8 weights, float32 matmuls, TF Python",
        "kzoo SavedModel int8 weights + bfloat16 matmuls, TF Python",
        "kzoo SavedModel, C API (TF Serving's loader), README's threads",
        "kzoo SavedModel, C API, 2 intra-op threads (README's latency flags)",
        "kzoo SavedModel, C API, README's threads, TF_ENABLE_ONEDNN_OPTS=0",
        "kzoo SavedModel, C API, 2 intra-op threads, TF_ENABLE_ONEDNN_OPTS=0",
        "kzoo SavedModel, C API, TF Serving's default threads", "CTranslate2 float32", "CTranslate2 int8"]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[1]) > 0 and float(cells[4]) > 0  # sentences/s, latency
        assert 20 < float(cells[6]) < 60  # BLEU of the shipped translator on 16 sentences
        assert cells[7].endswith("/16")
    # the C API loader runs the same graph (with TensorFlow's kernels or oneDNN's), the plain export the same weights
    # without XLA and lanes
    assert {rows[k].split(" | ")[7] for k in (2, 5, 6, 7, 8, 9)} == {"16/16"}

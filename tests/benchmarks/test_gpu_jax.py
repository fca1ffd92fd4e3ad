"""benchmarks/gpu_jax.py, the GPU run under JAX, goes end to end on the CPU with --smoke: `export` (TensorFlow), the
JAX run with TensorFlow made unimportable (as on the GPU machine, which has none), then `score` (TensorFlow)."""

import math
import os
import re
import subprocess
import sys

import pytest

from tests.train.worker_processes import REPOSITORY

# The GPU machine has no TensorFlow: the JAX run is made to fail on any import of it, here too.
WITHOUT_TENSORFLOW = """
import importlib.abc, runpy, sys
class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError(f"no TensorFlow on the GPU machine: {name}")
sys.meta_path.insert(0, NoTensorFlow())
sys.argv = ["benchmarks/gpu_jax.py", *sys.argv[1:]]
sys.path.insert(0, "benchmarks")
runpy.run_path("benchmarks/gpu_jax.py", run_name="__main__")
"""


def run(arguments, backend, prefix=()):
    env = {**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": str(REPOSITORY)}
    completed = subprocess.run([sys.executable, *prefix, *arguments], cwd=REPOSITORY, env=env, capture_output=True,
                               text=True, timeout=900)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return completed.stdout


@pytest.fixture(scope="module")
def sections(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu_jax")
    data, gpu_report, results = folder / "data" / "multi30k.npz", folder / "out" / "RESULTS_gpu.md", folder / "R.md"
    results.write_text("# kzoo benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    run(["benchmarks/gpu_jax.py", "export", "--smoke", "--data", str(data)], "tensorflow")
    assert data.stat().st_size < 1e6 and (data.parent / "tokenizer.model").is_file()
    run(["--smoke", "--data", str(data), "--output", str(gpu_report)], "jax", prefix=("-c", WITHOUT_TENSORFLOW))
    assert (gpu_report.parent / "multi30k_val_greedy_ids.npz").is_file()
    run(["benchmarks/gpu_jax.py", "score", "--smoke", "--data", str(data), "--report", str(gpu_report), "--output",
         str(results)], "tensorflow")

    def section(path):
        text = path.read_text()
        return text, text[text.index("<!-- gpu-jax:start -->"):text.index("<!-- gpu-jax:end -->")]

    return section(gpu_report)[1], section(results)


def cells(row):
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


@pytest.mark.slow  # minutes on the CI machine: three processes, eight small XLA-compiled models; `make test-slow`
def test_the_jax_run_reports_both_contenders_in_both_precisions(sections):
    gpu_section, _ = sections
    assert "TensorFlow modules loaded: 0." in gpu_section and "(backend jax)" in gpu_section
    rows = [cells(line) for line in gpu_section.splitlines() if "| kzoo |" in line or "| keras-hub |" in line]
    families = ["BERT-base masked-LM pretraining (smoke sizes)", "Transformer-base translation training (smoke sizes)"]
    assert [row[:3] for row in rows] == [[family, precision, contender] for precision in ("mixed_bfloat16", "float32")
                                         for family in families for contender in ("kzoo", "keras-hub")]
    for row in rows:
        assert int(row[3].replace(",", "")) > 1000  # parameters
        assert float(row[5].replace(",", "")) > 0  # tokens/s
        assert row[7].split()[0] == ("bfloat16" if row[1] == "mixed_bfloat16" else "float32")
        assert float(row[7].split()[1]) >= 0 and re.fullmatch(r"\d+\.\d%", row[8])  # matmul peak, MFU
        assert row[9] == "—" if row[2] == "keras-hub" else float(row[9]) > 0  # kzoo ÷ keras-hub
    by_contender = {(row[0], row[1], row[2]): int(row[3].replace(",", "")) for row in rows}
    for family in families:  # the same configuration: kzoo's BERT adds only its next-sentence head
        kzoo, hub = by_contender[(family, "float32", "kzoo")], by_contender[(family, "float32", "keras-hub")]
        assert kzoo == hub if family.startswith("Transformer") else 0 < kzoo - hub < 3 * 64 * 64


@pytest.mark.slow
def test_the_translation_run_trains_decodes_and_is_scored(sections):
    gpu_section, (results, section) = sections
    epochs = [cells(line) for line in gpu_section.splitlines() if re.match(r"\| \d+ \|", line)]
    assert epochs and [int(row[0]) for row in epochs] == list(range(1, len(epochs) + 1))
    for row in epochs:
        loss, accuracy, val_loss, val_accuracy = map(float, row[1:5])
        assert 0 < loss < 2 * math.log(500) and 0 < val_loss < 2 * math.log(500) and 0 <= accuracy <= 1
        assert 0 <= val_accuracy <= 1 and int(row[5]) >= 1 and float(row[7].replace(",", "")) > 0  # steps, tokens/s
    assert re.search(r"of 16 val sentences: \d+\.\d s", gpu_section)
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in results  # only its own section is rewritten
    bleu = re.search(r"Greedy val BLEU (\d+\.\d\d), chrF (\d+\.\d\d)", section)
    assert bleu and 0 <= float(bleu[1]) <= 100 and 0 <= float(bleu[2]) <= 100  # a few smoke steps: about 0
    assert section.count(" → ") == 3 and "Transformer-base translation training (smoke sizes)" in section

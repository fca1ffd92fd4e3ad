"""benchmarks/gpu.py, the one-GPU throughput benchmark, runs end to end on the CPU with --smoke (tiny models)."""

import os
import re
import subprocess
import sys

import pytest

from tests.train.worker_processes import REPOSITORY


@pytest.mark.slow  # 36 s on the CI machine; `make test-slow` runs it
def test_the_gpu_benchmark_runs_on_the_cpu_with_smoke_sizes(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# kzoo benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    completed = subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--smoke", "--peak-tflops", "0.4", "--output", str(results)],
        cwd=REPOSITORY, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True, text=True, timeout=400,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text  # only its own section is rewritten
    section = text[text.index("<!-- gpu-training:start -->"):text.index("<!-- gpu-training:end -->")]
    rows = [line for line in section.splitlines() if "| kzoo |" in line or "| keras-hub |" in line]
    families = ["BERT-base masked-LM pretraining", "Transformer-base translation training",
                "BERT-small masked-LM pretraining"]
    assert [row.split(" | ")[0][2:].split(" (")[0] for row in rows] == [name for name in families for _ in (0, 1)]
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[4].replace(",", "")) > 0  # tokens/s
        assert re.fullmatch(r"\d+\.\d%", cells[6])  # MFU against the given peak
        if cells[1] == "keras-hub":
            assert cells[7] == "—"
        else:
            assert float(cells[7]) > 0  # kzoo ÷ keras-hub
    assert "bf16 peak for MFU: 0.4 TFLOP/s, given with --peak-tflops" in section

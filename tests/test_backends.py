"""kzoo's modelling core computes the same values under Keras's TensorFlow and JAX backends, and imports no
TensorFlow under JAX."""

import os
import subprocess
import sys

import numpy as np
import pytest

from tests import backend_outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_under(backend, *args):
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def jax_outputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("jax") / "outputs.npz"
    result = run_under("jax", "tests/backend_outputs.py", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(path) as outputs:
        return dict(outputs)


def test_models_give_tensorflows_values_under_jax(jax_outputs):
    import keras

    assert keras.backend.backend() == "tensorflow"
    ours = backend_outputs.outputs()
    assert str(jax_outputs.pop("backend")) == "jax" and str(ours.pop("backend")) == "tensorflow"
    assert sorted(jax_outputs) == sorted(ours)
    for name, value in ours.items():
        assert np.all(np.isfinite(value)), name
        assert np.std(value) > 1e-3, f"{name} is constant: the comparison would prove nothing"
        np.testing.assert_allclose(jax_outputs[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    # The cached decoding path gives the teacher-forced logits on both backends.
    np.testing.assert_allclose(ours["transformer_cached_logits"][0, :4], ours["transformer_logits"][0, :4], atol=1e-5)


def test_the_modelling_core_imports_no_tensorflow_under_jax():
    code = (
        "import sys, kzoo, kzoo.layers, kzoo.models, kzoo.metrics, kzoo.checkpoints; "
        "model = kzoo.bert_tiny(vocabulary_size=100); "
        "print(sorted(m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')))"
    )
    result = run_under("jax", "-c", code)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"

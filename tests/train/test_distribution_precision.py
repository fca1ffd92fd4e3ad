"""Mixed precision trains to the float32 loss: mixed_bfloat16 (CPU, TPU) and mixed_float16 with loss scaling (GPU),
here on the CPU, on the 16-step run of tests/train/fit_worker.py."""

import keras
import numpy as np
import pytest

from tests.train import fit_worker

# The largest relative difference from float32 allowed in any epoch's mean training loss and in the final
# evaluation loss. Measured on this run: 4e-4 for mixed_bfloat16 (8 significant bits), 7e-5 for mixed_float16.
TOLERANCES = {"mixed_bfloat16": 5e-3, "mixed_float16": 1e-3}


@pytest.fixture(scope="module")
def float32_run():
    keras.config.set_dtype_policy("float32")
    return fit_worker.train()


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_to_the_float32_loss(policy, float32_run):
    keras.config.set_dtype_policy(policy)  # the autouse fixture in conftest.py restores float32
    mixed = fit_worker.train()
    assert not np.array_equal(mixed["losses"], float32_run["losses"])  # the policy did change the arithmetic
    np.testing.assert_allclose(mixed["losses"], float32_run["losses"], rtol=TOLERANCES[policy])
    np.testing.assert_allclose(mixed["evaluate_loss"], float32_run["evaluate_loss"], rtol=TOLERANCES[policy])
    assert mixed["losses"][-1] < 0.8 * mixed["losses"][0]
    # Keras wraps the optimizer in dynamic loss scaling under mixed_float16 only (bfloat16 has float32's range).
    assert mixed["optimizer"] == ("LossScaleOptimizer" if policy == "mixed_float16" else "SGD")

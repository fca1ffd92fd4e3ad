import numpy as np

from kzoo.layers import MeanPooling
from tests.harness import run_layer_test


def test_mean_pooling_harness():
    rng = np.random.default_rng(0)
    inputs = {"sequence": rng.normal(size=(3, 5, 4)).astype("float32"),
              "padding_mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], "int32")}
    run_layer_test(MeanPooling, {}, inputs, expected_output_shape=(3, 4), expected_num_trainable_weights=0,
                   run_training=False)


def test_mean_pooling_averages_the_real_positions_only():
    sequence = np.arange(2 * 4 * 2, dtype="float32").reshape(2, 4, 2)
    mask = np.array([[True, True, False, False], [False, False, False, False]])
    pooled = np.asarray(MeanPooling()(sequence, mask))
    np.testing.assert_allclose(pooled[0], sequence[0, :2].mean(0))
    np.testing.assert_array_equal(pooled[1], [0.0, 0.0])  # no real position: zeros, not NaN

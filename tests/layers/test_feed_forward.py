import keras
import numpy as np

from kzoo.layers import FeedForward
from tests.harness import run_layer_test


def test_layer_harness():
    run_layer_test(
        FeedForward,
        init_kwargs={"intermediate_dim": 32, "activation": "gelu"},
        inputs={"x": np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")},
        expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=4,
        expected_num_params=16 * 32 + 32 + 32 * 16 + 16,
    )


def test_is_position_wise_and_uses_exact_gelu():
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    layer = FeedForward(intermediate_dim=12, activation="gelu")
    y = np.asarray(layer(x))
    w1, b1, w2, b2 = (np.asarray(w) for w in layer.weights)
    hidden = x @ w1 + b1
    exact_gelu = keras.ops.convert_to_numpy(keras.activations.gelu(hidden, approximate=False))
    np.testing.assert_allclose(y, exact_gelu @ w2 + b2, atol=1e-5)

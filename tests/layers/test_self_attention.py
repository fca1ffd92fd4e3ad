import numpy as np

from kzoo.layers import Attention, SelfAttention
from tests.harness import run_layer_test


def test_layer_harness():
    run_layer_test(
        SelfAttention,
        init_kwargs={"key_dim": 8, "dropout": 0.1},
        inputs={"x": np.random.default_rng(0).normal(size=(2, 7, 12)).astype("float32")},
        expected_output_shape=(2, 7, 8),
        expected_num_trainable_weights=6,
        expected_num_params=3 * (12 * 8 + 8),
    )


def test_is_attention_with_x_prime_equal_to_x():
    x = np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")
    self_attention = SelfAttention(key_dim=4)
    attention = Attention(key_dim=4)
    y = self_attention(x)
    attention(x, x)
    attention.set_weights(self_attention.get_weights())
    np.testing.assert_allclose(np.asarray(attention(x, x)), np.asarray(y), atol=1e-6)


def test_causal_mask_hides_later_positions():
    x = np.random.default_rng(2).normal(size=(1, 5, 6)).astype("float32")
    _, alpha = SelfAttention(key_dim=4)(x, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_array_equal(np.triu(np.asarray(alpha)[0], k=1), 0.0)
    np.testing.assert_allclose(np.asarray(alpha)[0, 0, 0], 1.0)

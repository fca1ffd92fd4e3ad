import numpy as np
import pytest

from kzoo.layers import DecoderBlock
from tests.harness import run_layer_test

D, FF = 16, 32


@pytest.mark.parametrize("normalize_first", [False, True])
def test_layer_harness(normalize_first):
    rng = np.random.default_rng(0)
    run_layer_test(
        DecoderBlock,
        init_kwargs={"num_heads": 2, "intermediate_dim": FF, "normalize_first": normalize_first},
        inputs={
            "x_prime": rng.normal(size=(2, 5, D)).astype("float32"),
            "u": rng.normal(size=(2, 7, D)).astype("float32"),
            "decoder_padding_mask": np.array([[1, 1, 1, 0, 0], [1] * 5], dtype=bool),
            "encoder_padding_mask": np.array([[1] * 4 + [0] * 3, [1] * 7], dtype=bool),
        },
        expected_output_shape=(2, 5, D),
        expected_num_trainable_weights=8 + 8 + 4 + 6,
        expected_num_params=2 * 4 * (D * D + D) + (D * FF + FF + FF * D + D) + 3 * 2 * D,
    )


def test_returns_self_and_cross_attention_weights():
    rng = np.random.default_rng(1)
    x_prime, u = rng.normal(size=(2, 5, D)).astype("float32"), rng.normal(size=(2, 7, D)).astype("float32")
    y, self_weights, cross_weights = DecoderBlock(num_heads=2, intermediate_dim=FF)(
        x_prime, u, return_attention_scores=True
    )
    assert y.shape == (2, 5, D)
    assert cross_weights.shape == (2, 2, 5, 7)
    np.testing.assert_array_equal(np.triu(np.asarray(self_weights), k=1), 0.0)  # causal by default


def test_encoder_width_may_differ_from_decoder_width():
    rng = np.random.default_rng(2)
    y = DecoderBlock(num_heads=2, intermediate_dim=FF)(
        rng.normal(size=(1, 4, D)).astype("float32"), rng.normal(size=(1, 3, 24)).astype("float32")
    )
    assert y.shape == (1, 4, D)

import numpy as np
import pytest

from kzoo.layers import EncoderBlock
from tests.harness import run_layer_test

D, FF = 16, 32
ATTENTION_PARAMS = 4 * (D * D + D)
FEED_FORWARD_PARAMS = D * FF + FF + FF * D + D


@pytest.mark.parametrize("normalize_first", [False, True])
def test_layer_harness(normalize_first):
    rng = np.random.default_rng(0)
    run_layer_test(
        EncoderBlock,
        init_kwargs={"num_heads": 2, "intermediate_dim": FF, "normalize_first": normalize_first},
        inputs={"x": rng.normal(size=(2, 6, D)).astype("float32"),
                "padding_mask": np.array([[1, 1, 1, 0, 0, 0], [1] * 6], dtype=bool)},
        expected_output_shape=(2, 6, D),
        expected_num_trainable_weights=8 + 4 + 4,
        expected_num_params=ATTENTION_PARAMS + FEED_FORWARD_PARAMS + 2 * 2 * D,
    )


def test_post_ln_output_is_normalized():
    x = np.random.default_rng(1).normal(size=(2, 6, D)).astype("float32") * 5 + 3
    y = np.asarray(EncoderBlock(num_heads=2, intermediate_dim=FF)(x))
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(-1), 1.0, atol=1e-3)


def test_returns_attention_weights():
    x = np.random.default_rng(2).normal(size=(2, 6, D)).astype("float32")
    y, alpha = EncoderBlock(num_heads=2, intermediate_dim=FF)(x, return_attention_scores=True)
    assert y.shape == (2, 6, D) and alpha.shape == (2, 2, 6, 6)


def test_width_not_divisible_by_heads_is_a_clear_error():
    with pytest.raises(ValueError, match="hidden_dim=10 is not divisible by num_heads=4"):
        EncoderBlock(num_heads=4, intermediate_dim=8)(np.zeros((1, 3, 10), "float32"))

import numpy as np
import pytest

from kzoo.layers import MultiHead
from tests.harness import run_layer_test


def test_layer_harness_cross_attention():
    rng = np.random.default_rng(0)
    run_layer_test(
        MultiHead,
        init_kwargs={"num_heads": 2, "key_dim": 4, "value_dim": 3, "output_dim": 5, "dropout": 0.1},
        inputs={"x": rng.normal(size=(2, 7, 12)).astype("float32"), "x_prime": rng.normal(size=(2, 5, 10))
                .astype("float32")},
        expected_output_shape=(2, 5, 5),
        expected_num_trainable_weights=8,
        expected_num_params=(10 * 8 + 8) + (12 * 8 + 8) + (12 * 6 + 6) + (6 * 5 + 5),
    )


def test_layer_harness_self_attention_with_padding_mask():
    rng = np.random.default_rng(1)
    run_layer_test(
        MultiHead,
        init_kwargs={"num_heads": 4, "key_dim": 4, "use_bias": False},
        inputs={"x": rng.normal(size=(2, 6, 16)).astype("float32"),
                "padding_mask": np.array([[1, 1, 1, 1, 0, 0], [1] * 6], dtype=bool)},
        expected_output_shape=(2, 6, 16),
        expected_num_trainable_weights=4,
        expected_num_params=4 * 16 * 16,
    )


def test_returns_one_weight_matrix_per_head():
    x = np.random.default_rng(2).normal(size=(2, 6, 16)).astype("float32")
    y, alpha = MultiHead(num_heads=4, key_dim=4)(x, x[:, :3], return_attention_scores=True)
    assert y.shape == (2, 3, 16)
    assert alpha.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(np.asarray(alpha).sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{"num_heads": 0, "key_dim": 4}, {"num_heads": 2, "key_dim": 4, "output_dim": 0}])
def test_rejects_bad_arguments_naming_the_value(kwargs):
    name = "num_heads" if kwargs["num_heads"] == 0 else "output_dim"
    with pytest.raises(ValueError, match=f"{name}=0"):
        MultiHead(**kwargs)

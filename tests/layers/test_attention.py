import numpy as np
import pytest

from kzoo.layers import Attention
from tests.harness import run_layer_test


def softmax(z):
    z = z - z.max(-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def test_layer_harness():
    rng = np.random.default_rng(0)
    run_layer_test(
        Attention,
        init_kwargs={"key_dim": 8, "value_dim": 6, "dropout": 0.1},
        inputs={"x": rng.normal(size=(2, 7, 12)).astype("float32"), "x_prime": rng.normal(size=(2, 5, 10))
                .astype("float32")},
        expected_output_shape=(2, 5, 6),
        expected_num_trainable_weights=6,
        expected_num_params=(10 * 8 + 8) + (12 * 8 + 8) + (12 * 6 + 6),
    )


def test_matches_the_lecture_formula():
    # α_j = softmax(Kᵀ q_j / √d_k), c_j = V α_j, written column by column as in the lecture, in numpy.
    rng = np.random.default_rng(1)
    x, x_prime = rng.normal(size=(1, 6, 5)), rng.normal(size=(1, 3, 4))
    layer = Attention(key_dim=4, value_dim=2)
    c, alpha = layer(x.astype("float32"), x_prime.astype("float32"), return_attention_scores=True)
    W_Q, b_Q = (np.asarray(w) for w in layer.query_dense.weights)
    W_K, b_K = (np.asarray(w) for w in layer.key_dense.weights)
    W_V, b_V = (np.asarray(w) for w in layer.value_dense.weights)
    K = (x[0] @ W_K + b_K).T  # (d_k, m): the columns are k_1 ... k_m
    V = (x[0] @ W_V + b_V).T  # (d_v, m)
    for j in range(3):
        q_j = x_prime[0, j] @ W_Q + b_Q
        alpha_j = softmax(K.T @ q_j / np.sqrt(4))
        np.testing.assert_allclose(np.asarray(alpha)[0, j], alpha_j, atol=1e-6)
        np.testing.assert_allclose(np.asarray(c)[0, j], V @ alpha_j, atol=1e-5)


def test_padding_mask_zeroes_the_weights_of_padded_keys():
    rng = np.random.default_rng(2)
    x, x_prime = rng.normal(size=(2, 4, 6)).astype("float32"), rng.normal(size=(2, 3, 6)).astype("float32")
    mask = np.array([[True, True, False, False], [True, True, True, False]])
    _, alpha = Attention(key_dim=4)(x, x_prime, padding_mask=mask, return_attention_scores=True)
    alpha = np.asarray(alpha)
    np.testing.assert_array_equal(alpha[~np.broadcast_to(mask[:, None, :], alpha.shape)], 0.0)
    np.testing.assert_allclose(alpha.sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{"key_dim": 0}, {"key_dim": 4, "value_dim": -1}, {"key_dim": 4, "dropout": 1.0}])
def test_rejects_bad_arguments_naming_the_value(kwargs):
    name, value = list(kwargs.items())[-1]
    with pytest.raises(ValueError, match=f"{name}={value}"):
        Attention(**kwargs)

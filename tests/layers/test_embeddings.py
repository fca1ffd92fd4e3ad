import math

import keras
import numpy as np
import pytest

from kzoo.layers import PositionEmbedding, SinusoidalPositionEncoding, TokenEmbedding
from tests.harness import run_layer_test


def test_token_embedding_harness():
    run_layer_test(
        TokenEmbedding,
        init_kwargs={"vocabulary_size": 20, "hidden_dim": 8},
        inputs={"inputs": np.array([[3, 4, 5, 0], [7, 1, 0, 0]], dtype="int32")},
        expected_output_shape=(2, 4, 8),
        expected_num_trainable_weights=1,
        expected_num_params=160,
    )


def test_token_embedding_scales_by_sqrt_d_and_ties_the_output_projection():
    layer = TokenEmbedding(vocabulary_size=10, hidden_dim=16)
    ids = np.array([[1, 2, 3]])
    x = np.asarray(layer(ids))
    table = np.asarray(layer.embeddings)
    np.testing.assert_allclose(x[0], table[[1, 2, 3]] * math.sqrt(16), rtol=1e-6)
    logits = np.asarray(layer(x, reverse=True))
    np.testing.assert_allclose(logits, x @ table.T, rtol=1e-5, atol=1e-5)
    unscaled = TokenEmbedding(vocabulary_size=10, hidden_dim=16, scale=False)
    np.testing.assert_allclose(np.asarray(unscaled(ids))[0], np.asarray(unscaled.embeddings)[[1, 2, 3]])


@pytest.mark.parametrize("tie_weights", [True, False], ids=["tied", "untied"])
def test_reverse_kernel_projects_as_reverse_does(tie_weights):
    layer = TokenEmbedding(vocabulary_size=10, hidden_dim=16, tie_weights=tie_weights)
    x = np.asarray(layer(np.array([[1, 2, 3]])))
    kernel = layer.reverse_kernel()
    expected = np.asarray(layer.embeddings).T if tie_weights else np.asarray(layer.reverse_embeddings)
    np.testing.assert_array_equal(np.asarray(kernel), expected)  # (hidden_dim, vocabulary_size)
    np.testing.assert_allclose(np.asarray(layer(x, reverse=True, reverse_kernel=kernel)),
                               np.asarray(layer(x, reverse=True)), rtol=1e-6, atol=1e-6)


def test_reverse_kernel_is_in_the_compute_dtype():
    layer = TokenEmbedding(vocabulary_size=10, hidden_dim=16, dtype="mixed_bfloat16")
    x = layer(np.array([[1, 2, 3]]))
    kernel = layer.reverse_kernel()
    # what `reverse=True` multiplies by: the float32 matrix, read in the compute dtype inside a call
    assert keras.backend.standardize_dtype(kernel.dtype) == "bfloat16"
    np.testing.assert_array_equal(np.asarray(layer(x, reverse=True, reverse_kernel=kernel), "float32"),
                                  np.asarray(layer(x, reverse=True), "float32"))


def paper_encoding(length, d):
    pe = np.zeros((length, d))
    for pos in range(length):
        for i in range(d // 2):
            pe[pos, 2 * i] = math.sin(pos / 10000 ** (2 * i / d))
            pe[pos, 2 * i + 1] = math.cos(pos / 10000 ** (2 * i / d))
    return pe


def test_sinusoidal_encoding_is_the_papers_formula():
    x = np.zeros((2, 11, 12), "float32")
    encoding = np.asarray(SinusoidalPositionEncoding()(x))
    np.testing.assert_allclose(encoding[0], paper_encoding(11, 12), atol=1e-5)
    np.testing.assert_array_equal(encoding[0], encoding[1])
    shifted = np.asarray(SinusoidalPositionEncoding()(x[:, :3], start_index=8))
    np.testing.assert_allclose(shifted[0], paper_encoding(11, 12)[8:], atol=1e-5)


def test_sinusoidal_encoding_harness():
    run_layer_test(
        SinusoidalPositionEncoding,
        init_kwargs={"max_wavelength": 100.0},
        inputs={"x": np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")},
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=0,
        run_training=False,
    )


def test_position_embedding_harness_and_values():
    layer = run_layer_test(
        PositionEmbedding,
        init_kwargs={"sequence_length": 10},
        inputs={"x": np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")},
        expected_output_shape=(2, 6, 8),
        expected_num_trainable_weights=1,
        expected_num_params=80,
    )
    x = np.zeros((1, 4, 8), "float32")
    table = np.asarray(layer.position_embeddings)
    np.testing.assert_array_equal(np.asarray(layer(x))[0], table[:4])
    np.testing.assert_array_equal(np.asarray(layer(x, start_index=3))[0], table[3:7])


def test_position_embedding_refuses_sequences_longer_than_its_table():
    with pytest.raises(ValueError, match="12 positions but sequence_length=10"):
        PositionEmbedding(sequence_length=10)(np.zeros((1, 12, 4), "float32"))

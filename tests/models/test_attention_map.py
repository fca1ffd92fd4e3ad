"""A BERT's attention weights (`Bert.attention_weights`) and their map over a text (`kzoo.models.attention_map`)."""

import keras
import numpy as np
import pytest

import kzoo
from kzoo.models import Bert, BertClassifier, attention_map

TINY = dict(vocabulary_size=100, num_layers=2, hidden_dim=16, num_heads=2, max_sequence_length=12)
INPUTS = {
    "token_ids": np.array([[2, 5, 6, 7, 3, 0, 0], [2, 8, 9, 3, 10, 11, 3]], dtype="int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1]], dtype="int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]], dtype="int32"),
}
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "fine", "dull", "film", "plot"]


def numpy_attention(block, x, padding_mask):
    """A block's self-attention weights recomputed in numpy from its query and key weights: softmax(QKᵀ/√d_k)."""
    layer = block.self_attention
    wq, bq, wk, bk = (np.asarray(w) for w in (layer.query_kernel, layer.query_bias, layer.key_kernel, layer.key_bias))
    q = np.einsum("bnd,dhk->bhnk", x, wq) + bq[None, :, None, :]
    k = np.einsum("bnd,dhk->bhnk", x, wk) + bk[None, :, None, :]
    logits = np.einsum("bhtk,bhmk->bhtm", q, k) / np.sqrt(wq.shape[-1])
    logits = np.where(padding_mask[:, None, None, :].astype(bool), logits, -np.inf)
    logits -= logits.max(-1, keepdims=True)
    return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)


def numpy_embeddings(model, inputs):
    """The first block's input recomputed in numpy: token + segment + position embeddings, layer-normalized."""
    n = inputs["token_ids"].shape[1]
    x = (np.asarray(model.token_embedding.embeddings)[inputs["token_ids"]]
         + np.asarray(model.segment_embedding.embeddings)[inputs["segment_ids"]]
         + np.asarray(model.position_embedding.weights[0])[:n])
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    gamma, beta = (np.asarray(w) for w in model.embeddings_norm.weights)
    return (x - mean) / np.sqrt(variance + model.layer_norm_epsilon) * gamma + beta


def test_weights_are_the_forward_pass_s_recomputed_by_hand():
    keras.utils.set_random_seed(3)
    model = Bert(**TINY)
    weights = [np.asarray(w) for w in model.attention_weights(INPUTS)]
    assert len(weights) == 2 and all(w.shape == (2, 2, 7, 7) and w.dtype == np.float32 for w in weights)
    mask = INPUTS["padding_mask"]
    first = numpy_attention(model.encoder_blocks[0], numpy_embeddings(model, INPUTS), mask)
    np.testing.assert_allclose(weights[0], first, atol=2e-5)
    # The last block's input, as the model's own graph computes it, then its weights by hand.
    hidden = keras.Model(model.input, model.encoder_blocks[0].output)(INPUTS)
    last = numpy_attention(model.encoder_blocks[1], np.asarray(hidden), mask)
    np.testing.assert_allclose(weights[1], last, atol=2e-5)
    assert not np.allclose(weights[0], weights[1], atol=1e-3)  # two blocks, two different maps


def test_rows_sum_to_one_and_padding_gets_nothing():
    keras.utils.set_random_seed(4)
    weights = np.stack([np.asarray(w) for w in Bert(**TINY).attention_weights(INPUTS)])  # (layers, batch, h, n, n)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    assert np.all(weights[:, 0, :, :, 5:] == 0.0)  # the first example's two padding positions
    assert np.all(weights[:, 0, :, :, :5] > 0.0) and np.all(weights[:, 1] > 0.0)


def test_dropout_is_off():
    keras.utils.set_random_seed(5)
    model = Bert(**{**TINY, "dropout": 0.5})
    first, second = (np.asarray(model.attention_weights(INPUTS)[-1]) for _ in range(2))
    np.testing.assert_array_equal(first, second)


def test_missing_inputs_are_named():
    with pytest.raises(ValueError, match="padding_mask, segment_ids missing"):
        Bert(**TINY).attention_weights({"token_ids": INPUTS["token_ids"]})


def classifier():
    keras.utils.set_random_seed(6)
    preprocessor = kzoo.text.BertPreprocessor(VOCABULARY, sequence_length=12)
    backbone = Bert(vocabulary_size=len(VOCABULARY), num_layers=2, hidden_dim=8, num_heads=2, max_sequence_length=12)
    return BertClassifier(backbone, 2, preprocessor=preprocessor)


def test_map_of_a_text_is_its_real_tokens_and_the_backbone_s_weights():
    task = classifier()
    tokens, weights = attention_map(task, "a fine film")
    assert tokens == ["[CLS]", "a", "fine", "film", "[SEP]"]
    assert weights.shape == (2, 2, 5, 5)
    features = {name: np.asarray(value) for name, value in task.preprocessor(["a fine film"]).items()}
    padded = np.stack([np.asarray(w)[0] for w in task.backbone.attention_weights(features)])  # (2, 2, 12, 12)
    np.testing.assert_array_equal(weights, padded[:, :, :5, :5])
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)  # nothing was lost to the padding cut away
    assert np.all(padded[..., 5:] == 0.0)


def test_map_of_a_pair_and_of_a_bare_backbone():
    task = classifier()
    tokens, weights = attention_map(task.backbone, "a dull plot", "a fine film", preprocessor=task.preprocessor)
    assert tokens == ["[CLS]", "a", "dull", "plot", "[SEP]", "a", "fine", "film", "[SEP]"]
    assert weights.shape == (2, 2, 9, 9)
    np.testing.assert_array_equal(weights, attention_map(task, "a dull plot", "a fine film")[1])


def test_bad_arguments_are_clear_errors():
    task = classifier()
    with pytest.raises(ValueError, match="has no preprocessor"):
        attention_map(task.backbone, "a fine film")
    with pytest.raises(TypeError, match="pass a kzoo.models.Bert"):
        attention_map(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]), "a fine film")
    with pytest.raises(TypeError, match="pass one string"):
        attention_map(task, ["a fine film", "a dull plot"])

"""kzoo's attention and blocks agree with independent implementations: Keras and keras-hub.

Each test builds the kzoo layer and its reference with the same hyper-parameters, perturbs every kzoo weight away
from its initial value (so a bias, a LayerNorm gamma or a swapped kernel that is copied wrongly cannot go unnoticed),
copies the weights across with an explicit sublayer-to-sublayer mapping, and compares outputs in float32.

Padding is only ever at the end of a sequence and every sequence has at least one real token: on a query whose keys
are all masked the implementations differ by design (Keras gives zero weights, kzoo finite weights summing to one).
"""

import keras
import keras_hub
import numpy as np
import pytest

import kzoo

ATOL = 1e-5
RTOL = 1e-5
BATCH, HIDDEN, HEADS, INTERMEDIATE = 2, 16, 4, 32
DECODER_LENGTH, ENCODER_LENGTH = 6, 7


def perturb_weights(layer, rng, scale=0.2):
    """Move every weight of `layer` off its initial value, so zero biases and unit gammas are copied too."""
    for weight in layer.weights:
        weight.assign(np.asarray(weight) + rng.normal(scale=scale, size=weight.shape).astype("float32"))


def copy_weights(pairs):
    """Assign each (kzoo weight, reference weight) pair, checking the shapes match one to one."""
    for ours, theirs in pairs:
        assert tuple(ours.shape) == tuple(theirs.shape), (ours.path, ours.shape, theirs.path, theirs.shape)
        theirs.assign(np.asarray(ours))


def multi_head_pairs(multi_head, mha):
    """kzoo.layers.MultiHead -> keras.layers.MultiHeadAttention: same (d_in, heads, k) / (heads, v, d_out) layout."""
    return [
        (multi_head.query_kernel, mha._query_dense.kernel),
        (multi_head.query_bias, mha._query_dense.bias),
        (multi_head.key_kernel, mha._key_dense.kernel),
        (multi_head.key_bias, mha._key_dense.bias),
        (multi_head.value_kernel, mha._value_dense.kernel),
        (multi_head.value_bias, mha._value_dense.bias),
        (multi_head.output_kernel, mha._output_dense.kernel),
        (multi_head.output_bias, mha._output_dense.bias),
    ]


def layer_norm_pairs(ours, theirs):
    return [(ours.gamma, theirs.gamma), (ours.beta, theirs.beta)]


def feed_forward_pairs(feed_forward, intermediate_dense, output_dense):
    return [
        (feed_forward.intermediate_dense.kernel, intermediate_dense.kernel),
        (feed_forward.intermediate_dense.bias, intermediate_dense.bias),
        (feed_forward.output_dense.kernel, output_dense.kernel),
        (feed_forward.output_dense.bias, output_dense.bias),
    ]


def encoder_pairs(block, encoder):
    """kzoo.layers.EncoderBlock -> keras_hub.layers.TransformerEncoder, sublayer by sublayer."""
    return (
        multi_head_pairs(block.self_attention, encoder._self_attention_layer)
        + layer_norm_pairs(block.self_attention_norm, encoder._self_attention_layer_norm)
        + feed_forward_pairs(
            block.feed_forward, encoder._feedforward_intermediate_dense, encoder._feedforward_output_dense
        )
        + layer_norm_pairs(block.feed_forward_norm, encoder._feedforward_layer_norm)
    )


def decoder_pairs(block, decoder):
    """kzoo.layers.DecoderBlock -> keras_hub.layers.TransformerDecoder, sublayer by sublayer."""
    return (
        multi_head_pairs(block.self_attention, decoder._self_attention_layer)
        + layer_norm_pairs(block.self_attention_norm, decoder._self_attention_layer_norm)
        + multi_head_pairs(block.cross_attention, decoder._cross_attention_layer)
        + layer_norm_pairs(block.cross_attention_norm, decoder._cross_attention_layer_norm)
        + feed_forward_pairs(
            block.feed_forward, decoder._feedforward_intermediate_dense, decoder._feedforward_output_dense
        )
        + layer_norm_pairs(block.feed_forward_norm, decoder._feedforward_layer_norm)
    )


def trailing_padding_mask(lengths, length):
    """(batch, length) bool, True for the first lengths[b] positions of row b."""
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


def random_sequence(rng, length, dim):
    return rng.normal(size=(BATCH, length, dim)).astype("float32")


def assert_all_pairs_copied(pairs, layer):
    """The mapping covers every weight of the kzoo layer exactly once."""
    assert sorted(id(ours) for ours, _ in pairs) == sorted(id(w) for w in layer.weights)


@pytest.mark.parametrize("use_causal_mask", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_matches_keras_multi_head_attention(cross, padded, use_causal_mask):
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(1)
    num_heads, key_dim, value_dim = 3, 4, 5
    # Keys/values and queries have different widths and lengths in cross-attention, so a transposed layout fails.
    x = random_sequence(rng, ENCODER_LENGTH, 12 if cross else HIDDEN)
    x_prime = random_sequence(rng, DECODER_LENGTH, HIDDEN) if cross else x
    padding_mask = trailing_padding_mask([x.shape[1], 3], x.shape[1]) if padded else None

    multi_head = kzoo.layers.MultiHead(num_heads, key_dim, value_dim=value_dim)
    mha = keras.layers.MultiHeadAttention(num_heads, key_dim, value_dim=value_dim)
    multi_head.build(x.shape, x_prime.shape)
    mha.build(query_shape=x_prime.shape, value_shape=x.shape)
    perturb_weights(multi_head, rng)
    pairs = multi_head_pairs(multi_head, mha)
    assert_all_pairs_copied(pairs, multi_head)
    copy_weights(pairs)

    if cross:
        ours, our_weights = multi_head(
            x, x_prime, padding_mask=padding_mask, use_causal_mask=use_causal_mask, return_attention_scores=True
        )
    else:
        ours, our_weights = multi_head(
            x, padding_mask=padding_mask, use_causal_mask=use_causal_mask, return_attention_scores=True
        )
    attention_mask = None
    if padded:
        attention_mask = np.broadcast_to(padding_mask[:, None, :], (BATCH, x_prime.shape[1], x.shape[1]))
    theirs, their_weights = mha(
        query=x_prime,
        value=x,
        attention_mask=attention_mask,
        use_causal_mask=use_causal_mask,
        return_attention_scores=True,
    )

    assert our_weights.shape == (BATCH, num_heads, x_prime.shape[1], x.shape[1])
    np.testing.assert_allclose(np.asarray(our_weights), np.asarray(their_weights), atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding"])
@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_encoder_block_matches_keras_hub_transformer_encoder(normalize_first, padded):
    keras.utils.set_random_seed(2)
    rng = np.random.default_rng(2)
    config = dict(
        intermediate_dim=INTERMEDIATE,
        num_heads=HEADS,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-6,
        normalize_first=normalize_first,
    )
    block = kzoo.layers.EncoderBlock(**config)
    encoder = keras_hub.layers.TransformerEncoder(**config)
    x = random_sequence(rng, ENCODER_LENGTH, HIDDEN)
    padding_mask = trailing_padding_mask([ENCODER_LENGTH, 4], ENCODER_LENGTH) if padded else None
    block.build(x.shape)
    encoder.build(x.shape)
    perturb_weights(block, rng)
    pairs = encoder_pairs(block, encoder)
    assert_all_pairs_copied(pairs, block)
    copy_weights(pairs)

    ours = block(x, padding_mask=padding_mask)
    theirs = encoder(x, padding_mask=padding_mask)

    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding"])
@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_block_matches_keras_hub_transformer_decoder(normalize_first, padded):
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    config = dict(
        intermediate_dim=INTERMEDIATE,
        num_heads=HEADS,
        dropout=0.1,
        activation="relu",
        layer_norm_epsilon=1e-5,
        normalize_first=normalize_first,
    )
    block = kzoo.layers.DecoderBlock(**config)
    decoder = keras_hub.layers.TransformerDecoder(**config)
    x_prime = random_sequence(rng, DECODER_LENGTH, HIDDEN)
    u = random_sequence(rng, ENCODER_LENGTH, HIDDEN)
    masks = {}
    if padded:
        masks = dict(
            decoder_padding_mask=trailing_padding_mask([DECODER_LENGTH, 4], DECODER_LENGTH),
            encoder_padding_mask=trailing_padding_mask([5, ENCODER_LENGTH], ENCODER_LENGTH),
        )
    block.build(x_prime.shape, u.shape)
    decoder.build(x_prime.shape, u.shape)
    perturb_weights(block, rng)
    pairs = decoder_pairs(block, decoder)
    assert_all_pairs_copied(pairs, block)
    copy_weights(pairs)

    ours = block(x_prime, u, **masks)
    theirs = decoder(x_prime, u, **masks)

    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=ATOL, rtol=RTOL)

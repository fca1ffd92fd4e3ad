"""Properties of the attention math, checked on values: causality, padding invariance, permutation equivariance,
full dependence, fused heads = separate heads, well-formed attention weights, Keras masks, half-precision finiteness.

Biases are drawn at random (not zero) so that every property is tested with them in play.
"""

import keras
import numpy as np
import pytest
from keras.src.backend import get_keras_mask

import kzoo
from tests.harness import gradients, jacobian

BATCH, HIDDEN, HEADS, INTERMEDIATE = 2, 16, 2, 32
LENGTH, ENCODER_LENGTH = 6, 7


def seeded(seed):
    """Fix Keras' seed (weights, dropout) and return a numpy generator for the data."""
    keras.utils.set_random_seed(seed)
    return np.random.default_rng(seed)


def random_biases(seed):
    return keras.initializers.RandomNormal(stddev=0.2, seed=seed)


def random_sequence(rng, length, dim=HIDDEN, batch=BATCH):
    return rng.normal(size=(batch, length, dim)).astype("float32")


def trailing_padding_mask(lengths, length):
    """(batch, length) bool, True for the first lengths[b] positions of row b."""
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


def self_attention(key_dim=HIDDEN, **kwargs):
    return kzoo.layers.SelfAttention(key_dim, bias_initializer=random_biases(11), **kwargs)


def multi_head(**kwargs):
    return kzoo.layers.MultiHead(HEADS, HIDDEN // HEADS, bias_initializer=random_biases(12), **kwargs)


def encoder_block(**kwargs):
    return kzoo.layers.EncoderBlock(HEADS, INTERMEDIATE, bias_initializer=random_biases(13), **kwargs)


def decoder_block(**kwargs):
    return kzoo.layers.DecoderBlock(HEADS, INTERMEDIATE, bias_initializer=random_biases(14), **kwargs)


def small_transformer(**kwargs):
    return kzoo.models.Transformer(
        source_vocabulary_size=40,
        target_vocabulary_size=30,
        num_encoder_layers=2,
        num_decoder_layers=2,
        hidden_dim=HIDDEN,
        num_heads=HEADS,
        intermediate_dim=INTERMEDIATE,
        max_sequence_length=16,
        **kwargs,
    )


def assert_changed(a, b, min_diff=1e-3):
    diff = np.max(np.abs(np.asarray(a) - np.asarray(b)))
    assert diff > min_diff, f"expected a change, max abs difference is only {diff}"


# === Causality ===


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_block_is_causal(normalize_first):
    rng = seeded(20)
    block = decoder_block(normalize_first=normalize_first)
    x_prime = random_sequence(rng, LENGTH)
    u = random_sequence(rng, ENCODER_LENGTH)
    masks = dict(
        decoder_padding_mask=trailing_padding_mask([LENGTH, 4], LENGTH),
        encoder_padding_mask=trailing_padding_mask([5, ENCODER_LENGTH], ENCODER_LENGTH),
    )
    y = np.asarray(block(x_prime, u, **masks))
    for k in range(1, LENGTH + 1):
        future_changed = x_prime.copy()
        future_changed[:, k:] = random_sequence(rng, LENGTH - k)
        y_future = np.asarray(block(future_changed, u, **masks))
        np.testing.assert_allclose(y_future[:, :k], y[:, :k], atol=1e-6, rtol=0, err_msg=f"k={k}")

        present_changed = x_prime.copy()
        present_changed[:, k - 1] += rng.normal(size=(BATCH, HIDDEN)).astype("float32")
        y_present = np.asarray(block(present_changed, u, **masks))
        assert_changed(y_present[:, k - 1], y[:, k - 1])


def test_decoder_block_without_causal_mask_sees_the_future():
    rng = seeded(21)
    block = decoder_block()
    x_prime = random_sequence(rng, LENGTH)
    u = random_sequence(rng, ENCODER_LENGTH)
    y = block(x_prime, u, use_causal_mask=False)
    changed = x_prime.copy()
    changed[:, -1] += 1.0
    assert_changed(block(changed, u, use_causal_mask=False)[:, 0], y[:, 0])


def test_transformer_logits_are_causal_in_the_decoder_tokens():
    rng = seeded(22)
    model = small_transformer()
    encoder_token_ids = rng.integers(1, 40, size=(BATCH, 5)).astype("int32")
    decoder_token_ids = rng.integers(1, 30, size=(BATCH, LENGTH)).astype("int32")
    logits = np.asarray(model({"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids}))
    for k in range(1, LENGTH):
        changed = decoder_token_ids.copy()
        changed[:, k:] = (changed[:, k:] % 29) + 1  # other real tokens
        changed_logits = np.asarray(model({"encoder_token_ids": encoder_token_ids, "decoder_token_ids": changed}))
        np.testing.assert_allclose(changed_logits[:, :k], logits[:, :k], atol=1e-5, rtol=0, err_msg=f"k={k}")
        assert_changed(changed_logits[:, k], logits[:, k])


# === Padding invariance ===


def append_padding(rng, x, mask, extra):
    """Append `extra` positions of random garbage to x (batch, n, d), masked out in mask (batch, n)."""
    x_long = np.concatenate([x, random_sequence(rng, extra, x.shape[-1], x.shape[0])], axis=1)
    mask_long = np.concatenate([mask, np.zeros((mask.shape[0], extra), bool)], axis=1)
    return x_long, mask_long


@pytest.mark.parametrize("normalize_first", [False, True], ids=["post_ln", "pre_ln"])
def test_encoder_block_ignores_appended_padding(normalize_first):
    rng = seeded(30)
    block = encoder_block(normalize_first=normalize_first)
    x = random_sequence(rng, 5)
    mask = trailing_padding_mask([5, 3], 5)
    x_long, mask_long = append_padding(rng, x, mask, 3)

    y = np.asarray(block(x, padding_mask=mask))
    y_long = np.asarray(block(x_long, padding_mask=mask_long))

    np.testing.assert_allclose(y_long[:, :5][mask], y[mask], atol=1e-5, rtol=0)
    np.testing.assert_allclose(y_long[0, :5], np.asarray(block(x[:1]))[0], atol=1e-5, rtol=0)  # full row: no mask


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_ignores_appended_padding(cross):
    rng = seeded(31)
    layer = multi_head()
    x = random_sequence(rng, 5)
    mask = trailing_padding_mask([5, 2], 5)
    x_long, mask_long = append_padding(rng, x, mask, 3)
    if cross:
        x_prime = random_sequence(rng, 4)
        # Extra query rows too: each query is answered on its own, whatever else is in the batch.
        x_prime_long = np.concatenate([x_prime, random_sequence(rng, 2)], axis=1)
        y = np.asarray(layer(x, x_prime, padding_mask=mask))
        y_long = np.asarray(layer(x_long, x_prime_long, padding_mask=mask_long))[:, :4]
        np.testing.assert_allclose(y_long, y, atol=1e-5, rtol=0)
    else:
        y = np.asarray(layer(x, padding_mask=mask))
        y_long = np.asarray(layer(x_long, padding_mask=mask_long))
        np.testing.assert_allclose(y_long[:, :5][mask], y[mask], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "position_encoding, normalize_first", [("sinusoidal", False), ("learned", True)], ids=["sinusoidal", "learned"]
)
def test_transformer_ignores_appended_padding_tokens(position_encoding, normalize_first):
    rng = seeded(32)
    model = small_transformer(position_encoding=position_encoding, normalize_first=normalize_first)
    encoder_token_ids = rng.integers(1, 40, size=(BATCH, 5)).astype("int32")
    encoder_token_ids[1, 3:] = 0
    decoder_token_ids = rng.integers(1, 30, size=(BATCH, 4)).astype("int32")
    decoder_token_ids[1, 2:] = 0
    real = decoder_token_ids != 0

    logits = np.asarray(model({"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids}))
    long_logits = np.asarray(
        model(
            {
                "encoder_token_ids": np.pad(encoder_token_ids, ((0, 0), (0, 4))),
                "decoder_token_ids": np.pad(decoder_token_ids, ((0, 0), (0, 3))),
            }
        )
    )

    assert long_logits.shape == (BATCH, 7, 30)
    np.testing.assert_allclose(long_logits[:, :4][real], logits[real], atol=1e-5, rtol=0)


# === Permutation equivariance ===


@pytest.mark.parametrize("layer_fn", [self_attention, multi_head, encoder_block], ids=lambda f: f.__name__)
def test_self_attention_layers_are_permutation_equivariant(layer_fn):
    rng = seeded(40)
    layer = layer_fn()
    x = random_sequence(rng, LENGTH)
    mask = trailing_padding_mask([LENGTH, 4], LENGTH)
    permutation = np.array([3, 0, 5, 1, 4, 2])

    y = np.asarray(layer(x, padding_mask=mask))
    y_permuted = np.asarray(layer(x[:, permutation], padding_mask=mask[:, permutation]))

    np.testing.assert_allclose(y_permuted, y[:, permutation], atol=1e-5, rtol=0)
    assert_changed(y_permuted, y)  # the order matters for the outputs, only not for the map


# === Every output depends on every input ===


def jacobian_block_norms(layer, x, **kwargs):
    """(n, n) array: norm of d output_j / d input_i for one sequence x of shape (1, n, d)."""
    blocks = jacobian(lambda inputs: layer(inputs, **kwargs), x)[0, :, :, 0]  # (n_out, d_out, n_in, d_in)
    return np.sqrt(np.sum(blocks**2, axis=(1, 3)))


@pytest.mark.parametrize("layer_fn", [self_attention, encoder_block], ids=lambda f: f.__name__)
def test_every_output_depends_on_every_input(layer_fn):
    rng = seeded(50)
    layer = layer_fn()
    x = random_sequence(rng, 5, batch=1)

    norms = jacobian_block_norms(layer, x)

    assert norms.shape == (5, 5)
    assert np.all(norms > 1e-3), norms


@pytest.mark.parametrize("layer_fn", [self_attention, encoder_block], ids=lambda f: f.__name__)
def test_no_output_depends_on_other_padded_inputs(layer_fn):
    rng = seeded(51)
    layer = layer_fn()
    x = random_sequence(rng, 5, batch=1)
    mask = trailing_padding_mask([3], 5)

    norms = jacobian_block_norms(layer, x, padding_mask=mask)

    # Outputs j depend on all real inputs, and on a padded input i only through query j = i itself.
    assert np.all(norms[:, :3] > 1e-3), norms
    assert np.all(np.diag(norms) > 1e-3), norms
    off_diagonal_padded = ~np.eye(5, dtype=bool) & ~mask[0][None, :]
    np.testing.assert_array_equal(norms[off_diagonal_padded], 0.0)


# === MultiHead = l separate Attention layers ===


@pytest.mark.parametrize("use_causal_mask", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_equals_separate_single_head_attentions(cross, use_causal_mask):
    rng = seeded(60)
    num_heads, key_dim, value_dim = 3, 4, 5
    x = random_sequence(rng, ENCODER_LENGTH, 12 if cross else HIDDEN)
    x_prime = random_sequence(rng, 5) if cross else x
    mask = trailing_padding_mask([ENCODER_LENGTH, 4], ENCODER_LENGTH)
    fused = kzoo.layers.MultiHead(num_heads, key_dim, value_dim=value_dim, bias_initializer=random_biases(61))
    y, weights = fused(
        x, x_prime, padding_mask=mask, use_causal_mask=use_causal_mask, return_attention_scores=True
    )

    contexts = []
    for h in range(num_heads):
        head = kzoo.layers.Attention(key_dim, value_dim)
        head.build(x.shape, x_prime.shape)
        for dense, kernel, bias in (
            (head.query_dense, fused.query_kernel, fused.query_bias),
            (head.key_dense, fused.key_kernel, fused.key_bias),
            (head.value_dense, fused.value_kernel, fused.value_bias),
        ):
            dense.kernel.assign(np.asarray(kernel)[:, h, :])
            dense.bias.assign(np.asarray(bias)[h])
        c, alpha = head(
            x, x_prime, padding_mask=mask, use_causal_mask=use_causal_mask, return_attention_scores=True
        )
        np.testing.assert_allclose(np.asarray(weights)[:, h], np.asarray(alpha), atol=1e-6, rtol=0)
        contexts.append(np.asarray(c))
    output_kernel = np.asarray(fused.output_kernel).reshape(num_heads * value_dim, -1)
    expected = np.concatenate(contexts, axis=-1) @ output_kernel + np.asarray(fused.output_bias)

    np.testing.assert_allclose(np.asarray(y), expected, atol=1e-5, rtol=1e-5)


# === Attention weights and masks ===


def assert_weights_well_formed(weights, key_mask, causal=False):
    """Rows sum to 1; padded keys (and, if causal, later keys) get exactly 0. key_mask: (batch, m)."""
    weights = np.asarray(weights)  # (batch, [heads,] t, m)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-6, rtol=0)
    allowed = key_mask[:, None, :] if weights.ndim == 3 else key_mask[:, None, None, :]
    if causal:
        allowed = allowed & np.tril(np.ones(weights.shape[-2:], bool))
    allowed = np.broadcast_to(allowed, weights.shape)
    np.testing.assert_array_equal(weights[~allowed], 0.0)
    assert np.all(weights[allowed] > 0.0)


def test_attention_weights_sum_to_one_and_are_zero_on_padding():
    rng = seeded(70)
    x = random_sequence(rng, ENCODER_LENGTH)
    x_prime = random_sequence(rng, LENGTH)
    key_mask = trailing_padding_mask([ENCODER_LENGTH, 3], ENCODER_LENGTH)
    query_mask = trailing_padding_mask([LENGTH, 4], LENGTH)

    _, alpha = kzoo.layers.Attention(8)(x, x_prime, padding_mask=key_mask, return_attention_scores=True)
    assert_weights_well_formed(alpha, key_mask)

    _, alpha = kzoo.layers.MultiHead(HEADS, 8)(x, x_prime, padding_mask=key_mask, return_attention_scores=True)
    assert_weights_well_formed(alpha, key_mask)

    _, alpha = encoder_block()(x, padding_mask=key_mask, return_attention_scores=True)
    assert_weights_well_formed(alpha, key_mask)

    _, self_weights, cross_weights = decoder_block()(
        x_prime, x, decoder_padding_mask=query_mask, encoder_padding_mask=key_mask, return_attention_scores=True
    )
    assert_weights_well_formed(self_weights, query_mask, causal=True)
    assert_weights_well_formed(cross_weights, key_mask)


def embedded(token_ids, seed):
    """Embed token ids with Embedding(mask_zero=True): the result carries a Keras mask."""
    embedding = keras.layers.Embedding(
        20, HIDDEN, mask_zero=True, embeddings_initializer=keras.initializers.RandomNormal(seed=seed)
    )
    x = embedding(token_ids)
    np.testing.assert_array_equal(np.asarray(get_keras_mask(x)), token_ids != 0)
    return x


def test_layers_honour_a_keras_mask_like_a_padding_mask():
    seeded(71)
    encoder_ids = np.array([[3, 4, 5, 6, 7, 8, 9], [3, 4, 5, 0, 0, 0, 0]])
    decoder_ids = np.array([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 0, 0]])
    u, x_prime = embedded(encoder_ids, 1), embedded(decoder_ids, 2)
    u_plain, x_prime_plain = np.asarray(u), np.asarray(x_prime)  # the same vectors, without a Keras mask
    key_mask, query_mask = encoder_ids != 0, decoder_ids != 0

    def check(layer, masked_call, explicit_call, query_mask):
        y_masked = masked_call(layer)
        y_explicit = explicit_call(layer)
        for masked, explicit in zip(y_masked, y_explicit):
            np.testing.assert_allclose(np.asarray(masked), np.asarray(explicit), atol=1e-6, rtol=0)
        np.testing.assert_array_equal(np.asarray(get_keras_mask(y_masked[0])), query_mask)

    check(
        kzoo.layers.Attention(8),
        lambda layer: layer(u, x_prime, return_attention_scores=True),
        lambda layer: layer(u_plain, x_prime_plain, padding_mask=key_mask, return_attention_scores=True),
        query_mask,
    )
    check(
        kzoo.layers.SelfAttention(8),
        lambda layer: layer(u, return_attention_scores=True),
        lambda layer: layer(u_plain, padding_mask=key_mask, return_attention_scores=True),
        key_mask,
    )
    check(
        multi_head(),
        lambda layer: layer(u, x_prime, return_attention_scores=True),
        lambda layer: layer(u_plain, x_prime_plain, padding_mask=key_mask, return_attention_scores=True),
        query_mask,
    )
    check(
        encoder_block(),
        lambda layer: layer(u, return_attention_scores=True),
        lambda layer: layer(u_plain, padding_mask=key_mask, return_attention_scores=True),
        key_mask,
    )
    check(
        decoder_block(),
        lambda layer: layer(x_prime, u, return_attention_scores=True),
        lambda layer: layer(
            x_prime_plain,
            u_plain,
            decoder_padding_mask=query_mask,
            encoder_padding_mask=key_mask,
            return_attention_scores=True,
        ),
        query_mask,
    )


def test_functional_model_propagates_the_keras_mask_into_the_blocks():
    seeded(72)
    encoder_embedding = keras.layers.Embedding(20, HIDDEN, mask_zero=True)
    decoder_embedding = keras.layers.Embedding(20, HIDDEN, mask_zero=True)
    encoder, decoder = encoder_block(), decoder_block()
    encoder_ids = keras.Input((None,), dtype="int32")
    decoder_ids = keras.Input((None,), dtype="int32")
    outputs = decoder(decoder_embedding(decoder_ids), encoder(encoder_embedding(encoder_ids)))
    model = keras.Model([encoder_ids, decoder_ids], outputs)
    encoder_token_ids = np.array([[3, 4, 5, 6, 7], [3, 4, 0, 0, 0]], "int32")
    decoder_token_ids = np.array([[1, 2, 3, 4], [1, 2, 3, 0]], "int32")

    y = np.asarray(model([encoder_token_ids, decoder_token_ids]))

    u = encoder(np.asarray(encoder_embedding(encoder_token_ids)), padding_mask=encoder_token_ids != 0)
    expected = decoder(
        np.asarray(decoder_embedding(decoder_token_ids)),
        np.asarray(u),
        decoder_padding_mask=decoder_token_ids != 0,
        encoder_padding_mask=encoder_token_ids != 0,
    )
    np.testing.assert_allclose(y, np.asarray(expected), atol=1e-6, rtol=0)
    unmasked = decoder(np.asarray(decoder_embedding(decoder_token_ids)), np.asarray(u))
    assert_changed(y[1], unmasked[1], min_diff=1e-4)  # the mask did something


# === Finiteness in half precision ===

POLICIES = ["mixed_float16", "mixed_bfloat16"]


@pytest.fixture
def float32_global_policy():
    assert keras.config.dtype_policy().name == "float32"
    yield
    assert keras.config.dtype_policy().name == "float32", "a test changed the global dtype policy"


def assert_finite(*tensors):
    for tensor in tensors:
        assert np.all(np.isfinite(np.asarray(tensor, dtype="float32"))), tensor


@pytest.mark.usefixtures("float32_global_policy")
@pytest.mark.parametrize("policy", POLICIES)
def test_fully_padded_sequences_stay_finite_in_half_precision(policy):
    rng = seeded(80)
    x = random_sequence(rng, ENCODER_LENGTH)
    x_prime = random_sequence(rng, LENGTH)
    # Row 0 is all padding; row 1 has padded positions (hence padded query rows in self-attention).
    key_mask = trailing_padding_mask([0, 3], ENCODER_LENGTH)
    query_mask = trailing_padding_mask([0, 4], LENGTH)

    c, alpha = kzoo.layers.Attention(8, dtype=policy)(x, x_prime, padding_mask=key_mask, return_attention_scores=True)
    y, weights = kzoo.layers.MultiHead(HEADS, 8, dtype=policy)(
        x, x_prime, padding_mask=key_mask, return_attention_scores=True
    )
    y_self, weights_self = kzoo.layers.MultiHead(HEADS, 8, dtype=policy)(
        x, padding_mask=key_mask, use_causal_mask=True, return_attention_scores=True
    )
    assert_finite(c, alpha, y, weights, y_self, weights_self)
    assert y.dtype == keras.DTypePolicy(policy).compute_dtype
    # A query with no key to attend to gets finite weights, not NaN: logits this small all round to -1e9 in float32,
    # so the row is uniform.
    np.testing.assert_allclose(np.asarray(weights, "float32")[0], 1.0 / ENCODER_LENGTH, atol=1e-3)

    encoder = encoder_block(dtype=policy)
    decoder = decoder_block(dtype=policy)
    u = encoder(x, padding_mask=key_mask)
    out = decoder(x_prime, u, decoder_padding_mask=query_mask, encoder_padding_mask=key_mask)

    def loss():
        hidden = encoder(x, padding_mask=key_mask)
        y = decoder(x_prime, hidden, decoder_padding_mask=query_mask, encoder_padding_mask=key_mask)
        return keras.ops.sum(keras.ops.cast(y, "float32") ** 2)

    grads = gradients(loss, lambda: encoder.trainable_variables + decoder.trainable_variables)
    assert_finite(u, out, *grads)


@pytest.mark.usefixtures("float32_global_policy")
@pytest.mark.parametrize("policy", POLICIES)
def test_transformer_with_empty_sequences_stays_finite_in_half_precision(policy):
    rng = seeded(81)
    model = small_transformer(dtype=policy, position_encoding="learned")
    encoder_token_ids = rng.integers(1, 40, size=(BATCH, 5)).astype("int32")
    encoder_token_ids[0] = 0
    decoder_token_ids = rng.integers(1, 30, size=(BATCH, 4)).astype("int32")
    decoder_token_ids[0] = 0
    decoder_token_ids[1, 2:] = 0

    logits = model({"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids})

    assert logits.dtype == "float32"
    assert_finite(logits)

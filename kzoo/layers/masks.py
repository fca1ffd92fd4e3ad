"""Padding and causal masks, and the masked softmax every attention layer shares.

Masks are boolean with True where attention is allowed. They are turned into an additive bias in float32, and the
softmax is computed in float32 too, so half-precision policies never see a -1e9 they cannot represent: a padded query
row or a fully padded sequence gives finite weights under `mixed_float16` and `mixed_bfloat16`.
"""

from keras import ops

# keras-hub and keras.layers.MultiHeadAttention read and write Keras masks through these same helpers.
from keras.src.backend import get_keras_mask, set_keras_mask

# The one "minus infinity" of kzoo: added to (or put in place of) the float32 logits of whatever must never be
# chosen or attended to: masked keys, beam-search slots, tokens past a length limit, padded answer positions. Its
# exponential is exactly 0 in float32, and, unlike -inf, it never turns a fully masked row into NaN.
MASKED_LOGIT = -1e9


def merge_masks(*masks):
    """AND together the masks that are not None; None when all are."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def key_padding_mask(x, padding_mask=None):
    """The key-side padding mask (batch, m): `padding_mask` AND the Keras mask that `x` carries, if any."""
    return merge_masks(padding_mask, get_keras_mask(x))


def carry_query_mask(output, queries):
    """Attach the Keras mask of the queries to an attention output: output position j is query j."""
    mask = get_keras_mask(queries)
    if mask is not None:
        set_keras_mask(output, mask)
    return output


def causal_mask(query_length, key_length, query_offset=0):
    """Boolean (query_length, key_length): query i may attend to keys 0..i + query_offset."""
    rows = ops.arange(query_length)[:, None] + query_offset
    cols = ops.arange(key_length)[None, :]
    return ops.greater_equal(rows, cols)


def attention_mask_for(query, padding_mask=None, attention_mask=None, use_causal_mask=False, key_length=None):
    """Combine a key padding mask (batch, m), an explicit (batch, t, m) mask and causality into one boolean mask.

    Returns None when nothing is masked, else a tensor broadcastable to (batch, t, m).
    """
    key_mask = None if padding_mask is None else ops.expand_dims(ops.cast(padding_mask, "bool"), 1)
    causal = None
    if use_causal_mask:
        query_length = ops.shape(query)[1]
        key_length = query_length if key_length is None else key_length
        causal = ops.expand_dims(causal_mask(query_length, key_length), 0)
    return merge_masks(key_mask, attention_mask, causal)


def masked_softmax(logits, mask=None):
    """Softmax over the last axis in float32, with disallowed positions (mask False) at zero weight.

    `logits` has any float dtype; `mask` is boolean and broadcastable to `logits`. Returns weights in the dtype of
    `logits`. A row whose keys are all masked gets finite weights that sum to one, never NaN.
    """
    dtype = logits.dtype
    logits = ops.cast(logits, "float32")
    if mask is not None:
        bias = ops.where(ops.cast(mask, "bool"), 0.0, MASKED_LOGIT)
        logits = logits + bias
    return ops.cast(ops.softmax(logits, axis=-1), dtype)

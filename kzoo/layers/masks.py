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
    """AND together the masks that are not None; None when all are.

    Example:
    ```python
    from kzoo.layers.masks import merge_masks

    mask = merge_masks(np.array([[True, True, False]]), None, np.array([[True, False, True]]))
    assert keras.ops.convert_to_numpy(mask).tolist() == [[True, False, False]]
    assert merge_masks(None, None) is None
    ```
    """
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def key_padding_mask(x, padding_mask=None):
    """The key-side padding mask (batch, m): `padding_mask` AND the Keras mask that `x` carries, if any.

    Example:
    ```python
    from kzoo.layers.masks import key_padding_mask

    x = keras.layers.Embedding(10, 4, mask_zero=True)(np.array([[3, 5, 0]]))  # carries the Keras mask of id 0
    mask = key_padding_mask(x, padding_mask=np.array([[False, True, True]]))
    assert keras.ops.convert_to_numpy(mask).tolist() == [[False, True, False]]
    ```
    """
    return merge_masks(padding_mask, get_keras_mask(x))


def carry_query_mask(output, queries):
    """Attach the Keras mask of the queries to an attention output: output position j is query j.

    Example:
    ```python
    from kzoo.layers.masks import carry_query_mask, get_keras_mask

    queries = keras.layers.Embedding(10, 4, mask_zero=True)(np.array([[3, 0]]))
    output = carry_query_mask(keras.ops.ones((1, 2, 8)), queries)
    assert keras.ops.convert_to_numpy(get_keras_mask(output)).tolist() == [[True, False]]
    ```
    """
    mask = get_keras_mask(queries)
    if mask is not None:
        set_keras_mask(output, mask)
    return output


def causal_mask(query_length, key_length, query_offset=0):
    """Boolean (query_length, key_length): query i may attend to keys 0..i + query_offset.

    Example:
    ```python
    from kzoo.layers.masks import causal_mask

    assert keras.ops.convert_to_numpy(causal_mask(2, 2)).tolist() == [[True, False], [True, True]]
    # Two new queries after one cached position: query 0 is position 1 and sees keys 0 and 1.
    assert keras.ops.convert_to_numpy(causal_mask(2, 3, query_offset=1)).tolist() == [
        [True, True, False], [True, True, True]]
    ```
    """
    rows = ops.arange(query_length)[:, None] + query_offset
    cols = ops.arange(key_length)[None, :]
    return ops.greater_equal(rows, cols)


def attention_mask_for(query, padding_mask=None, attention_mask=None, use_causal_mask=False, key_length=None):
    """Combine a key padding mask (batch, m), an explicit (batch, t, m) mask and causality into one boolean mask.

    Returns None when nothing is masked, else a tensor broadcastable to (batch, t, m).

    Example:
    ```python
    from kzoo.layers.masks import attention_mask_for

    query = np.zeros((1, 3, 8), "float32")
    mask = attention_mask_for(query, padding_mask=np.array([[True, True, False]]), use_causal_mask=True)
    assert keras.ops.convert_to_numpy(mask)[0].tolist() == [
        [True, False, False], [True, True, False], [True, True, False]]
    assert attention_mask_for(query) is None
    ```
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

    Example:
    ```python
    from kzoo.layers.masks import masked_softmax

    logits = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], "float32")
    weights = keras.ops.convert_to_numpy(masked_softmax(logits, np.array([[True, True, False], [False] * 3])))
    np.testing.assert_allclose(weights[0], [1 / (1 + np.e), np.e / (1 + np.e), 0.0], rtol=1e-6)
    assert np.isfinite(weights[1]).all() and np.isclose(weights[1].sum(), 1.0)  # a fully masked row: no NaN
    ```
    """
    dtype = logits.dtype
    logits = ops.cast(logits, "float32")
    if mask is not None:
        bias = ops.where(ops.cast(mask, "bool"), 0.0, MASKED_LOGIT)
        logits = logits + bias
    return ops.cast(ops.softmax(logits, axis=-1), dtype)

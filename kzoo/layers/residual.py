"""The residual connection around every sub-layer of a Transformer block."""


def residual(x, sublayer, norm, dropout, normalize_first, training=None):
    """`LayerNorm(x + Dropout(sublayer(x)))` (the paper), or `x + Dropout(sublayer(LayerNorm(x)))` (pre-LN).

    `sublayer` maps a tensor to a tensor, or to `(tensor, attention_weights)`; the weights, or None, are returned
    beside the result.

    Example:
    ```python
    from kzoo.layers.residual import residual

    x = np.ones((1, 2, 4), "float32")
    norm, dropout = keras.layers.LayerNormalization(), keras.layers.Dropout(0.1)
    # Pre-LN: x + Dropout(2 · LayerNorm(x)); a constant row normalizes to 0, so x comes back (no dropout when
    # not training).
    y, weights = residual(x, lambda h: 2 * h, norm, dropout, normalize_first=True)
    assert weights is None and np.allclose(keras.ops.convert_to_numpy(y), 1.0)
    # Post-LN (the paper): LayerNorm(x + 2x) of a constant row is 0.
    y, _ = residual(x, lambda h: 2 * h, norm, dropout, normalize_first=False)
    assert np.allclose(keras.ops.convert_to_numpy(y), 0.0)
    ```
    """
    y = sublayer(norm(x) if normalize_first else x)
    y, weights = y if isinstance(y, tuple) else (y, None)
    y = x + dropout(y, training=training)
    return (y if normalize_first else norm(y)), weights

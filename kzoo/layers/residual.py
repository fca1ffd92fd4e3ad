"""The residual connection around every sub-layer of a Transformer block."""


def residual(x, sublayer, norm, dropout, normalize_first, training=None):
    """`LayerNorm(x + Dropout(sublayer(x)))` (the paper), or `x + Dropout(sublayer(LayerNorm(x)))` (pre-LN).

    `sublayer` maps a tensor to a tensor, or to `(tensor, attention_weights)`; the weights, or None, are returned
    beside the result.
    """
    y = sublayer(norm(x) if normalize_first else x)
    y, weights = y if isinstance(y, tuple) else (y, None)
    y = x + dropout(y, training=training)
    return (y if normalize_first else norm(y)), weights

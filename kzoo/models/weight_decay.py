"""Which variables AdamW's decoupled weight decay leaves alone: every bias and the layer norms' gamma and beta.

BERT's optimizer (and nanoGPT's split) decays the weight matrices and embeddings only. kzoo's BERT tasks, the
translation recipe's `--weight-decay` and the BERT benchmarks all exclude the same names through this module.
"""

# Regular expressions searched in each variable's name: bias, query_bias, output_bias, ... and gamma, beta.
NOT_DECAYED = ("bias", "gamma", "beta")


def decay_weights_only(optimizer):
    """Exclude the biases and layer-norm parameters of every model `optimizer` will train from its weight decay, and
    return `optimizer`. Call it before the optimizer is built (before the first `fit` step or `optimizer.build`).

    Example:
    ```python
    import keras

    from kzoo.models.weight_decay import decay_weights_only

    layer = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="ones")
    layer.build((None, 1))
    optimizer = decay_weights_only(keras.optimizers.AdamW(0.5, weight_decay=0.1))
    zeros = [keras.ops.zeros(variable.shape) for variable in layer.trainable_variables]
    optimizer.apply(zeros, layer.trainable_variables)  # no gradient: only the decay moves a weight
    float(layer.kernel[0, 0]), float(layer.bias[0])  # (0.95, 1.0): the kernel decayed by 0.5 · 0.1, the bias not
    ```
    """
    optimizer.exclude_from_weight_decay(var_names=list(NOT_DECAYED))
    return optimizer

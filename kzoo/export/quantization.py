"""Weights stored quantized in a SavedModel (int8 with per-channel scales, or bfloat16) and read back once per
request, outside the decoding loop, through Keras's `StatelessScope`: the layers and the decoder run unchanged."""

import contextlib

import keras
import tensorflow as tf

QUANTIZATIONS = ("int8", "bfloat16")
COMPUTE_DTYPES = ("float32", "bfloat16")
INT8_MAX = 127.0

# The input axes of each kind of matrix, over which one scale is taken, so that every output channel has its own.
# MultiHead's query, key and value kernels, (d, heads, k), are applied as (d, heads·k) matrices; an embedding table
# is read by row (a token's vector and, as the tied output projection, that token's logit). Every other matrix is a
# kernel (inputs..., outputs) applied as x @ W, MultiHead's output kernel (heads, v, d) included.
INPUT_AXES = {"query_kernel": (0,), "key_kernel": (0,), "value_kernel": (0,), "embeddings": (-1,)}


def input_axes(path, rank):
    """The axes of the matrix at Keras variable `path` that one int8 scale spans.

    Example:
    ```python
    from kzoo.export.quantization import input_axes

    assert input_axes("decoder_block_0/self_attention/query_kernel", 3) == [0]     # (d, heads, k)
    assert input_axes("decoder_block_0/self_attention/output_kernel", 3) == [0, 1]  # (heads, v, d)
    assert input_axes("source_embedding/embeddings", 2) == [1]                      # one scale per token
    ```
    """
    axes = INPUT_AXES.get(path.rsplit("/", 1)[-1], tuple(range(rank - 1)))
    return [axis % rank for axis in axes]


def int8_quantize(value, axes):
    """`value` as (int8 values, float32 scale) with value ≈ values · scale: symmetric, one scale (absmax / 127) over
    `axes`, so each element is off by at most half its scale. An all-zero channel gets scale 1 and stays zero.

    Example:
    ```python
    from kzoo.export.quantization import int8_quantize

    values, scale = int8_quantize(tf.constant([[1.0, -0.5], [0.25, 2.0]]), axes=[0])
    assert values.numpy().tolist() == [[127, -32], [32, 127]] and scale.shape == (1, 2)
    ```
    """
    scale = tf.reduce_max(tf.abs(value), axis=axes, keepdims=True) / INT8_MAX
    scale = tf.where(scale > 0, scale, tf.ones_like(scale))
    return tf.cast(tf.clip_by_value(tf.round(value / scale), -INT8_MAX, INT8_MAX), tf.int8), scale


class QuantizedWeights:
    """The weights of `models` in the form `quantization` stores them, and `scope()`, under which the models read them.

    "int8": every floating-point matrix (rank 2 or more) as int8 values with a float32 scale per output channel
    (per row for embedding tables; see `input_axes`); "bfloat16": every such matrix rounded to bfloat16. Vectors
    (biases, layer-norm scales and offsets) and integer state stay as they are. `stored` lists the `tf.Variable`s that
    hold them, a shared (tied) matrix once: a SavedModel that tracks `stored` (not this object, which refers to the
    models' own variables) and runs the models inside `scope()` holds no float32 copy of the matrices (saving fails
    if any layer read a weight around the scope).

    Args:
        models: the Keras models whose variables to store (TensorFlow backend).
        quantization: "int8" or "bfloat16".

    Example:
    ```python
    from kzoo.export.quantization import QuantizedWeights

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    weights = QuantizedWeights([model], "int8")
    assert [v.dtype for v in weights.stored] == [tf.int8, tf.float32, tf.float32]  # kernel, its scales, bias
    x = np.ones((1, 3), "float32")
    with weights.scope():  # the Dense layer reads its kernel dequantized from the int8 variable
        y = model(x)
    np.testing.assert_allclose(y, model(x), atol=1e-2)
    ```
    """

    def __init__(self, models, quantization):
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization={quantization!r} is not a format kzoo exports: use one of "
                             f"{QUANTIZATIONS}, or None for float32 weights.")
        self.quantization = quantization
        self._targets, self._parts, seen = [], [], set()
        for model in models:
            for variable in model.variables:
                if id(variable) in seen:
                    continue
                seen.add(id(variable))
                self._targets.append(variable)
                self._parts.append(self._store(variable))
        self.stored = [part for parts in self._parts for part in parts]

    def _store(self, variable):
        value = tf.convert_to_tensor(variable.value)
        name = variable.path.replace("/", "__")
        if value.shape.rank < 2 or not value.dtype.is_floating:
            return (tf.Variable(value, trainable=False, name=name),)
        if self.quantization == "bfloat16":
            return (tf.Variable(tf.cast(value, tf.bfloat16), trainable=False, name=f"{name}__bfloat16"),)
        values, scale = int8_quantize(value, input_axes(variable.path, value.shape.rank))
        return (tf.Variable(values, trainable=False, name=f"{name}__int8"),
                tf.Variable(scale, trainable=False, name=f"{name}__scale"))

    def values(self):
        """[(Keras variable, its value read from the stored form, in the variable's dtype)]."""
        mapping = []
        for variable, parts in zip(self._targets, self._parts):
            value = tf.cast(parts[0], tf.float32) * parts[1] if len(parts) == 2 else parts[0]
            mapping.append((variable, tf.cast(value, variable.dtype)))
        return mapping

    @contextlib.contextmanager
    def scope(self):
        """Run the models with every weight read from the stored form, dequantized once where the scope opens (in a
        `tf.function`: once per call, outside any loop traced inside the scope)."""
        with keras.StatelessScope(state_mapping=self.values()):
            yield


def computing_in(model, compute_dtype):
    """`model` rebuilt from its config to compute in `compute_dtype` ("float32", or "bfloat16": Keras's
    mixed_bfloat16 policy, float32 variables and bfloat16 matmuls), holding the same weights; `model` itself when it
    already does.

    Example:
    ```python
    from kzoo.export.quantization import computing_in

    model = kzoo.models.Transformer(100, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    fast = computing_in(model, "bfloat16")
    assert fast.compute_dtype == "bfloat16" and fast.decoder_blocks[0].compute_dtype == "bfloat16"
    np.testing.assert_array_equal(fast.get_weights()[3], model.get_weights()[3])
    ```
    """
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype={compute_dtype!r} is not one kzoo exports: use one of {COMPUTE_DTYPES}.")
    policy = "float32" if compute_dtype == "float32" else "mixed_bfloat16"
    if model.dtype_policy.name == policy and all(layer.dtype_policy.name == policy for layer in model.layers):
        return model
    rebuilt = type(model).from_config({**model.get_config(), "dtype": policy})
    # A functional model's own policy stays float32 whatever its config says, and a Transformer sizes its decoding
    # caches by it: set it, so that the caches are bfloat16 like the keys and values written into them.
    rebuilt.dtype_policy = keras.DTypePolicy(policy)
    rebuilt.set_weights(model.get_weights())
    return rebuilt

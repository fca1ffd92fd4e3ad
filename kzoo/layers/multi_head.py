import math

import keras
from keras import ops

from kzoo.layers.initializers import clone_initializer
from kzoo.layers.masks import attention_mask_for, carry_query_mask, key_padding_mask, masked_softmax


@keras.saving.register_keras_serializable(package="kzoo")
class MultiHead(keras.layers.Layer):
    """Multi-head attention: l heads, each with its own W_Q, W_K, W_V, concatenated and projected by W_O.

    Head h computes the lecture's single-head `Attention`, `C_h = Attn_h(X, X')`; the layer returns
    `W_O [C_1; ...; C_l]`. The heads are computed fused: each projection is one matmul for all heads (the kernels
    are stored as (d_in, heads, d_k) like `keras.layers.MultiHeadAttention`, and applied as a plain 2-D matmul, whose
    weight gradient is a single matmul too), and the attention of all heads is one batched einsum. A test proves the
    result equals l separate `Attention` layers, concatenated and projected.

    Args:
        num_heads: int. l, the number of heads.
        key_dim: int. d_k, the size of each head's queries and keys.
        value_dim: int, optional. The size of each head's values; defaults to `key_dim`.
        output_dim: int, optional. The size of the output; defaults to the last dimension of the queries.
        dropout: float. Dropout rate on the attention weights during training. Defaults to 0.
        use_bias: bool. Whether the four projections have biases. Defaults to True.
        kernel_initializer: initializer for the projection kernels. Defaults to "glorot_uniform".
        bias_initializer: initializer for the biases. Defaults to "zeros".
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        x: float tensor (batch, m, d). Keys and values come from it; so do the queries when `x_prime` is None.
        x_prime: float tensor (batch, t, d'), optional. The queries' sequence, for attention over an encoder output.
        padding_mask: bool tensor (batch, m), optional. True for real tokens of `x`.
        attention_mask: bool tensor (batch, t, m), optional. True where query j may attend to key i.
        use_causal_mask: bool. Forbid a query to attend to later keys. Defaults to False.
        return_attention_scores: bool. Also return the weights, (batch, heads, t, m). Defaults to False.
        training: bool. Whether dropout is active.

    Masks: a Keras mask on `x` is combined with `padding_mask`. The softmax runs in float32, so fully padded rows
    stay finite under `mixed_float16` and `mixed_bfloat16`.

    Example:
    ```python
    multi_head = kzoo.layers.MultiHead(num_heads=8, key_dim=64)
    x = np.random.rand(2, 10, 512)
    y = multi_head(x)               # self-attention, (2, 10, 512)
    z = multi_head(x, x[:, :4])     # 4 queries over x, (2, 4, 512)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for arg, value in (("num_heads", num_heads), ("key_dim", key_dim)):
            if int(value) <= 0:
                raise ValueError(f"{arg}={value} must be a positive integer.")
        for arg, value in (("value_dim", value_dim), ("output_dim", output_dim)):
            if value is not None and int(value) <= 0:
                raise ValueError(f"{arg}={value} must be a positive integer or None.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1).")
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.value_dim = None if value_dim is None else int(value_dim)
        self.output_dim = None if output_dim is None else int(output_dim)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _kernel(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=clone_initializer(self.kernel_initializer))

    def _bias(self, name, shape):
        if not self.use_bias:
            return None
        return self.add_weight(name=name, shape=shape, initializer=clone_initializer(self.bias_initializer))

    def build(self, x_shape, x_prime_shape=None):
        x_prime_shape = x_shape if x_prime_shape is None else x_prime_shape
        heads, value_dim = self.num_heads, self.value_dim or self.key_dim
        output_dim = self.output_dim or x_prime_shape[-1]
        # Kernels laid out as keras.layers.MultiHeadAttention's, so weights copy across one to one.
        self.query_kernel = self._kernel("query_kernel", (x_prime_shape[-1], heads, self.key_dim))  # W_Q
        self.query_bias = self._bias("query_bias", (heads, self.key_dim))
        self.key_kernel = self._kernel("key_kernel", (x_shape[-1], heads, self.key_dim))  # W_K
        self.key_bias = self._bias("key_bias", (heads, self.key_dim))
        self.value_kernel = self._kernel("value_kernel", (x_shape[-1], heads, value_dim))  # W_V
        self.value_bias = self._bias("value_bias", (heads, value_dim))
        self.output_kernel = self._kernel("output_kernel", (heads, value_dim, output_dim))  # W_O
        self.output_bias = self._bias("output_bias", (output_dim,))
        self.weights_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="weights_dropout")

    def _project(self, x, kernel, bias):
        # (batch, n, d) @ (d, heads·k) as one 2-D matmul, then split the heads: (batch, n, heads, k).
        # The casts are no-ops inside `__call__` (Keras autocasts there); they matter when `key_value` and `attend`
        # are called directly, as a decoding cache does.
        d, heads, k = kernel.shape
        y = ops.matmul(x, ops.reshape(ops.cast(kernel, x.dtype), (d, heads * k)))
        if bias is not None:
            y = y + ops.reshape(ops.cast(bias, x.dtype), (heads * k,))
        return ops.reshape(y, (ops.shape(x)[0], ops.shape(x)[1], heads, k))

    def key_value(self, x):
        """The keys and values of `x`, each (batch, heads, m, dim): heads first, the layout attention's batched
        matmuls read, so that keys and values kept across decoding steps are never transposed again.

        Computed once per sentence for attention over an encoder output, and once per new position for a decoding
        cache; `attend` takes them back.
        """
        key = self._project(x, self.key_kernel, self.key_bias)  # (batch, m, heads, d_k)
        value = self._project(x, self.value_kernel, self.value_bias)  # (batch, m, heads, d_v)
        return ops.transpose(key, (0, 2, 1, 3)), ops.transpose(value, (0, 2, 1, 3))

    def attend(self, queries, key, value, mask=None, training=None):
        """Attention of `queries` (batch, t, d') over given keys and values; returns (output, weights).

        `mask` is boolean, broadcastable to (batch, t, m), True where query j may attend to key i.
        """
        q = self._project(queries, self.query_kernel, self.query_bias)  # (batch, t, heads, d_k)
        q = q * ops.cast(1.0 / math.sqrt(self.key_dim), q.dtype)
        logits = ops.einsum("bthk,bhmk->bhtm", q, key)
        alpha = masked_softmax(logits, None if mask is None else ops.expand_dims(mask, 1))  # (batch, heads, t, m)
        context = ops.einsum("bhtm,bhmv->bthv", self.weights_dropout(alpha, training=training), value)
        heads, value_dim, output_dim = self.output_kernel.shape
        context = ops.reshape(context, (ops.shape(context)[0], ops.shape(context)[1], heads * value_dim))
        output_kernel = ops.cast(self.output_kernel, context.dtype)
        y = ops.matmul(context, ops.reshape(output_kernel, (heads * value_dim, output_dim)))  # W_O [C_1; ...]
        if self.output_bias is not None:
            y = y + ops.cast(self.output_bias, y.dtype)
        return y, alpha

    def call(
        self,
        x,
        x_prime=None,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        queries = x if x_prime is None else x_prime
        mask = attention_mask_for(
            queries,
            padding_mask=key_padding_mask(x, padding_mask),
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            key_length=ops.shape(x)[1],
        )
        key, value = self.key_value(x)  # (batch, heads, m, d_k), (batch, heads, m, d_v)
        y, alpha = self.attend(queries, key, value, mask, training=training)
        carry_query_mask(y, queries)
        return (y, alpha) if return_attention_scores else y

    def compute_mask(self, x, previous_mask=None):
        # Keras offers only the first argument's mask here, which is the keys' for cross-attention; `call` attaches
        # the queries' mask to the output itself.
        return None

    def compute_output_shape(self, x_shape, x_prime_shape=None):
        x_prime_shape = x_shape if x_prime_shape is None else x_prime_shape
        return tuple(x_prime_shape[:-1]) + (self.output_dim or x_prime_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

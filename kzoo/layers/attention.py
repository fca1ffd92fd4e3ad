import math

import keras
from keras import ops

from kzoo.layers.initializers import clone_initializer
from kzoo.layers.masks import attention_mask_for, carry_query_mask, key_padding_mask, masked_softmax


@keras.saving.register_keras_serializable(package="kzoo")
class Attention(keras.layers.Layer):
    """Single-head attention, the lecture's `C = Attn(X, X')`, written as the textbook math.

    Keys and values come from the m vectors of `x` (the encoder sequence X), queries from the t vectors of `x_prime`
    (the decoder sequence X'):

        q_j = W_Q x'_j,   k_i = W_K x_i,   v_i = W_V x_i
        α_j = softmax(Kᵀ q_j / √d_k),   c_j = V α_j

    and the layer returns the t context vectors `c_j` (no output projection: `MultiHead` adds W_O). This is the
    readable path; `MultiHead` is the fused one production uses, and a test proves the two agree.

    Args:
        key_dim: int. d_k, the size of queries and keys.
        value_dim: int, optional. The size of values and of the output; defaults to `key_dim`.
        dropout: float. Dropout rate on the attention weights α during training. Defaults to 0.
        use_bias: bool. Whether W_Q, W_K, W_V have biases. Defaults to True (as in BERT and keras-hub).
        kernel_initializer: initializer for W_Q, W_K, W_V. Defaults to "glorot_uniform".
        bias_initializer: initializer for the biases. Defaults to "zeros".
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        x: float tensor (batch, m, d_x). The key/value sequence X.
        x_prime: float tensor (batch, t, d_x'). The query sequence X'.
        padding_mask: bool tensor (batch, m), optional. True for real tokens of `x`, False for padding.
        attention_mask: bool tensor (batch, t, m), optional. True where query j may attend to key i.
        use_causal_mask: bool. Forbid query j to attend to keys after position j. Defaults to False.
        return_attention_scores: bool. Also return α, (batch, t, m). Defaults to False.
        training: bool. Whether dropout is active.

    Masks: a Keras mask on `x` (from `Embedding(mask_zero=True)`) is combined with `padding_mask`. Padded query
    rows, and queries whose keys are all padding, give finite outputs in every precision.

    Example:
    ```python
    attention = kzoo.layers.Attention(key_dim=16)
    x = np.random.rand(2, 7, 32)        # m = 7 encoder vectors
    x_prime = np.random.rand(2, 5, 32)  # t = 5 decoder vectors
    c = attention(x, x_prime)           # (2, 5, 16)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.1.
    """

    def __init__(
        self,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(key_dim) <= 0:
            raise ValueError(f"key_dim={key_dim} must be a positive integer.")
        if value_dim is not None and int(value_dim) <= 0:
            raise ValueError(f"value_dim={value_dim} must be a positive integer or None.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1).")
        self.key_dim = int(key_dim)
        self.value_dim = None if value_dim is None else int(value_dim)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _projection(self, name, input_dim, units):
        dense = keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        dense.build((None, None, input_dim))
        return dense

    def build(self, x_shape, x_prime_shape=None):
        x_prime_shape = x_shape if x_prime_shape is None else x_prime_shape
        value_dim = self.value_dim or self.key_dim
        self.query_dense = self._projection("query", x_prime_shape[-1], self.key_dim)  # W_Q
        self.key_dense = self._projection("key", x_shape[-1], self.key_dim)  # W_K
        self.value_dense = self._projection("value", x_shape[-1], value_dim)  # W_V
        self.weights_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name="weights_dropout")

    def call(
        self,
        x,
        x_prime,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None
    ):
        mask = attention_mask_for(
            x_prime,
            padding_mask=key_padding_mask(x, padding_mask),
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            key_length=ops.shape(x)[1],
        )
        q = self.query_dense(x_prime) * (1.0 / math.sqrt(self.key_dim))  # (batch, t, d_k)
        k = self.key_dense(x)  # (batch, m, d_k)
        v = self.value_dense(x)  # (batch, m, d_v)
        logits = ops.einsum("btd,bmd->btm", q, k)  # Kᵀq_j / √d_k for every j
        alpha = masked_softmax(logits, mask)  # (batch, t, m)
        c = ops.einsum("btm,bmd->btd", self.weights_dropout(alpha, training=training), v)  # (batch, t, d_v)
        carry_query_mask(c, x_prime)
        return (c, alpha) if return_attention_scores else c

    def compute_mask(self, x, previous_mask=None):
        # Keras offers only the first argument's mask here, which is the keys'; `call` attaches the queries' mask.
        return None

    def compute_output_shape(self, x_shape, x_prime_shape=None):
        x_prime_shape = x_shape if x_prime_shape is None else x_prime_shape
        return tuple(x_prime_shape[:-1]) + (self.value_dim or self.key_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


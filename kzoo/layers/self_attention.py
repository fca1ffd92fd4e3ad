import keras

from kzoo.layers.attention import Attention


@keras.saving.register_keras_serializable(package="kzoo")
class SelfAttention(Attention):
    """Single-head self-attention: the lecture's `Attn(X, X)`, `Attention` with X' = X.

    Every output vector c_j is a weighted average of the values of *all* m input vectors, so each output position
    depends on every input position.

    Args:
        Those of `Attention`: `key_dim`, `value_dim`, `dropout`, `use_bias`, `kernel_initializer`,
        `bias_initializer`.

    Call arguments:
        x: float tensor (batch, m, d). Queries, keys and values all come from it.
        padding_mask, attention_mask, use_causal_mask, return_attention_scores, training: as for `Attention`.

    Masks: a Keras mask on `x` is honoured and passed on to the output.

    Example:
    ```python
    self_attention = kzoo.layers.SelfAttention(key_dim=16)
    c = self_attention(np.random.rand(2, 7, 32))  # (2, 7, 16)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.1.
    """

    def build(self, x_shape):
        super().build(x_shape, x_shape)

    def call(
        self,
        x,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None
    ):
        return super().call(
            x,
            x,
            padding_mask=padding_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            return_attention_scores=return_attention_scores,
            training=training,
        )

    def compute_output_shape(self, x_shape):
        return super().compute_output_shape(x_shape, x_shape)

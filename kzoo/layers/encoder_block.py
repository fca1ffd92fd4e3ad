import keras

from kzoo.layers.masks import key_padding_mask
from kzoo.layers.residual import residual
from kzoo.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="kzoo")
class EncoderBlock(TransformerBlock):
    """One Transformer encoder block: multi-head self-attention, then the position-wise feed-forward network.

    Each of the two sub-layers is wrapped in a residual connection and layer normalization:
    `x = LayerNorm(x + Dropout(MultiHead(x)))`, then `x = LayerNorm(x + Dropout(FeedForward(x)))` (post-LN, as in
    the paper and BERT); with `normalize_first=True`, `x = x + Dropout(SubLayer(LayerNorm(x)))` (pre-LN).

    Args:
        num_heads: int. Attention heads; must divide the model width d.
        intermediate_dim: int. Inner size of the feed-forward network (d_ff).
        dropout: float. Dropout on each sub-layer's output and on the attention weights. Defaults to 0.1.
        activation: feed-forward activation. Defaults to "relu".
        normalize_first: bool. Pre-LN instead of the paper's post-LN. Defaults to False.
        layer_norm_epsilon: float. Defaults to 1e-5 (BERT uses 1e-12).
        kernel_initializer: initializer for all kernels. Defaults to "glorot_uniform".
        bias_initializer: initializer for all biases. Defaults to "zeros".
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        x: float tensor (batch, seq, d).
        padding_mask: bool tensor (batch, seq), optional. True for real tokens.
        attention_mask: bool tensor (batch, seq, seq), optional. True where position j may attend to i.
        return_attention_scores: bool. Also return the weights, (batch, heads, seq, seq). Defaults to False.
        training: bool. Whether dropout is active.

    Masks: a Keras mask on `x` is combined with `padding_mask` and passed on to the output.

    Example:
    ```python
    block = kzoo.layers.EncoderBlock(num_heads=8, intermediate_dim=2048)
    y = block(np.random.rand(2, 10, 512))  # (2, 10, 512)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1.
    """

    def build(self, x_shape):
        self.self_attention = self._multi_head("self_attention", x_shape)
        self.self_attention_norm, self.self_attention_dropout = self._norm_and_dropout("self_attention", x_shape)
        self.feed_forward = self._feed_forward(x_shape)
        self.feed_forward_norm, self.feed_forward_dropout = self._norm_and_dropout("feed_forward", x_shape)

    def call(self, x, padding_mask=None, attention_mask=None, return_attention_scores=False, training=None):
        padding_mask = key_padding_mask(x, padding_mask)
        x, weights = residual(
            x,
            lambda y: self.self_attention(
                y,
                padding_mask=padding_mask,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.self_attention_norm,
            self.self_attention_dropout,
            self.normalize_first,
            training,
        )
        x, _ = residual(
            x, self.feed_forward, self.feed_forward_norm, self.feed_forward_dropout, self.normalize_first, training
        )
        return (x, weights) if return_attention_scores else x

    def compute_output_shape(self, x_shape):
        return x_shape

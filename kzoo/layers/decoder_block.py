import keras

from kzoo.layers.masks import key_padding_mask
from kzoo.layers.residual import residual
from kzoo.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="kzoo")
class DecoderBlock(TransformerBlock):
    """One Transformer decoder block: causal self-attention, attention over the encoder output, feed-forward.

    With X' the decoder sequence and U the encoder output (post-LN, as in the paper):

        X' = LayerNorm(X' + Dropout(MultiHead(X', causal)))   # position j sees decoder positions <= j
        X' = LayerNorm(X' + Dropout(MultiHead(U, X')))        # queries from X', keys and values from U
        X' = LayerNorm(X' + Dropout(FeedForward(X')))

    With `normalize_first=True` each sub-layer is `X' + Dropout(SubLayer(LayerNorm(X')))` instead.

    Args:
        num_heads: int. Attention heads; must divide the model width d.
        intermediate_dim: int. Inner size of the feed-forward network (d_ff).
        dropout: float. Dropout on each sub-layer's output and on the attention weights. Defaults to 0.1.
        activation: feed-forward activation. Defaults to "relu".
        normalize_first: bool. Pre-LN instead of the paper's post-LN. Defaults to False.
        layer_norm_epsilon: float. Defaults to 1e-5.
        kernel_initializer: initializer for all kernels. Defaults to "glorot_uniform".
        bias_initializer: initializer for all biases. Defaults to "zeros".
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        x_prime: float tensor (batch, t, d). The decoder sequence.
        u: float tensor (batch, m, d_u). The encoder output.
        decoder_padding_mask: bool tensor (batch, t), optional. True for real decoder tokens.
        encoder_padding_mask: bool tensor (batch, m), optional. True for real encoder tokens.
        use_causal_mask: bool. Defaults to True; False lets every decoder position see the whole of `x_prime`.
        return_attention_scores: bool. Also return the self- and cross-attention weights,
            (batch, heads, t, t) and (batch, heads, t, m). Defaults to False.
        training: bool. Whether dropout is active.

    Masks: Keras masks on `x_prime` and `u` are combined with the explicit padding masks; the output carries the
    mask of `x_prime`.

    Example:
    ```python
    block = kzoo.layers.DecoderBlock(num_heads=8, intermediate_dim=2048)
    u = np.random.rand(2, 12, 512)        # encoder output
    x_prime = np.random.rand(2, 10, 512)  # decoder sequence
    y = block(x_prime, u)                 # (2, 10, 512)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.1.
    """

    def build(self, x_prime_shape, u_shape):
        self.self_attention = self._multi_head("self_attention", x_prime_shape)
        self.self_attention_norm, self.self_attention_dropout = self._norm_and_dropout("self_attention", x_prime_shape)
        self.cross_attention = self._multi_head("cross_attention", u_shape, x_prime_shape)
        self.cross_attention_norm, self.cross_attention_dropout = self._norm_and_dropout(
            "cross_attention", x_prime_shape
        )
        self.feed_forward = self._feed_forward(x_prime_shape)
        self.feed_forward_norm, self.feed_forward_dropout = self._norm_and_dropout("feed_forward", x_prime_shape)

    def call(
        self,
        x_prime,
        u,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        return_attention_scores=False,
        training=None,
    ):
        decoder_padding_mask = key_padding_mask(x_prime, decoder_padding_mask)
        encoder_padding_mask = key_padding_mask(u, encoder_padding_mask)
        x, self_weights = residual(
            x_prime,
            lambda y: self.self_attention(
                y,
                padding_mask=decoder_padding_mask,
                use_causal_mask=use_causal_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.self_attention_norm,
            self.self_attention_dropout,
            self.normalize_first,
            training,
        )
        x, cross_weights = residual(
            x,
            lambda y: self.cross_attention(
                u,
                y,
                padding_mask=encoder_padding_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            ),
            self.cross_attention_norm,
            self.cross_attention_dropout,
            self.normalize_first,
            training,
        )
        x, _ = residual(
            x, self.feed_forward, self.feed_forward_norm, self.feed_forward_dropout, self.normalize_first, training
        )
        return (x, self_weights, cross_weights) if return_attention_scores else x

    def compute_output_shape(self, x_prime_shape, u_shape):
        return x_prime_shape

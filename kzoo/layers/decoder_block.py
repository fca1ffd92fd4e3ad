import collections

import keras
from keras import ops

from kzoo.layers.masks import causal_mask, key_padding_mask
from kzoo.layers.residual import residual
from kzoo.layers.transformer_block import TransformerBlock


def write_positions(cache, index, new):
    """`cache` (batch, heads, length, dim) with `new` (batch, heads, t, dim) written at positions index .. index+t-1.

    A scatter (TensorScatterUpdate), a core TensorFlow op that TF Serving runs, unlike the XLA-only dynamic update
    slice behind `keras.ops.slice_update` on TensorFlow.

    Example:
    ```python
    from kzoo.layers.decoder_block import write_positions

    cache = np.zeros((2, 1, 4, 1), "float32")  # (batch, heads, length, dim)
    cache = write_positions(cache, 1, np.ones((2, 1, 2, 1), "float32"))
    assert keras.ops.convert_to_numpy(cache)[:, 0, :, 0].tolist() == [[0, 1, 1, 0], [0, 1, 1, 0]]
    ```
    """
    batch, heads, steps = ops.shape(new)[0], ops.shape(new)[1], ops.shape(new)[2]
    rows = ops.repeat(ops.arange(batch), heads * steps)
    head_index = ops.tile(ops.repeat(ops.arange(heads), steps), [batch])
    columns = ops.tile(ops.arange(steps) + index, [batch * heads])
    updates = ops.reshape(new, (batch * heads * steps,) + tuple(new.shape[3:]))
    return ops.scatter_update(cache, ops.stack([rows, head_index, columns], axis=1), updates)


class GrowingCache(collections.namedtuple("GrowingCache", ["keys", "values"])):
    """A self-attention cache that holds exactly the positions decoded so far, each (batch, heads, length, size):
    a step appends its new positions, so a step's work on the cache grows with the prefix, not with the longest
    output allowed. A TensorFlow while loop carries it with its length dimension left open (`shape_invariants`).
    `DecoderBlock.empty_cache` without `max_length` makes one; a plain (keys, values) tuple of `max_length`
    positions keeps fixed shapes instead (written with `write_positions`), as an XLA- or jit-compiled step needs.

    Example:
    ```python
    from kzoo.layers.decoder_block import GrowingCache

    cache = GrowingCache(np.zeros((2, 1, 0, 4), "float32"), np.zeros((2, 1, 0, 4), "float32"))
    cache = cache.extend(np.ones((2, 1, 1, 4), "float32"), np.ones((2, 1, 1, 4), "float32"))
    assert tuple(cache.keys.shape) == (2, 1, 1, 4) and isinstance(cache, GrowingCache)
    ```
    """

    def extend(self, keys, values):
        """The cache with `keys` and `values` (batch, heads, t, size) appended as its next t positions."""
        return GrowingCache(ops.concatenate([self.keys, keys], axis=2), ops.concatenate([self.values, values], axis=2))


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

        def self_attention(y):
            return self.self_attention(y, padding_mask=decoder_padding_mask, use_causal_mask=use_causal_mask,
                                       return_attention_scores=return_attention_scores, training=training)

        def cross_attention(y):
            return self.cross_attention(u, y, padding_mask=encoder_padding_mask,
                                        return_attention_scores=return_attention_scores, training=training)

        x, self_weights, cross_weights = self._sublayers(x_prime, self_attention, cross_attention, training)
        return (x, self_weights, cross_weights) if return_attention_scores else x

    def empty_cache(self, batch, max_length=None, dtype="float32"):
        """An empty self-attention cache for `decode_step`, keys and values each (batch, heads, length, size), the
        sizes of the layer's own key and value projections (heads first, as `MultiHead.key_value` gives them).

        Without `max_length`, a `GrowingCache` of no positions; with it, a (keys, values) tuple of `max_length` zero
        positions that keeps its shape (for a compiled step; `max_length` may be a scalar tensor)."""
        kernels = (self.self_attention.key_kernel, self.self_attention.value_kernel)
        length = 0 if max_length is None else max_length
        shapes = [(batch, kernel.shape[1], length, kernel.shape[2]) for kernel in kernels]
        zeros = tuple(ops.zeros(shape, dtype=dtype) for shape in shapes)
        return GrowingCache(*zeros) if max_length is None else zeros

    def decode_step(self, x_prime, index, cache, cross_key_value, encoder_padding_mask=None):
        """The block on the new decoder positions only, reading and extending a key/value cache.

        Args:
            x_prime: float tensor (batch, t, d): the vectors of decoder positions index .. index + t - 1.
            index: int scalar tensor: the position of `x_prime[:, 0]`.
            cache: this block's self-attention keys and values for every position so far, from `empty_cache` or
                the previous step: a `GrowingCache` (the new positions are appended) or a (keys, values) tuple of
                max_length positions (the new positions are written at `index`).
            cross_key_value: (keys, values) of the encoder output, each (sentences, heads, m, head_dim), from
                `self.cross_attention.key_value(u)`, computed once per sentence. `x_prime` may hold several rows
                per sentence (beam search's hypotheses, consecutive): then (batch / sentences) rows share one
                sentence's keys and values, which attention reads without copying them per row.
            encoder_padding_mask: bool tensor (sentences, m), optional.

        Returns:
            (output (batch, t, d), updated cache). Equal to `call` on the whole prefix, at the new positions.
        """
        updated = []

        def cached_self_attention(y):
            key, value = self.self_attention.key_value(y)
            if isinstance(cache, GrowingCache):
                updated.append(cache.extend(key, value))
            else:
                updated.append(tuple(write_positions(c, index, new) for c, new in zip(cache, (key, value))))
            mask = causal_mask(ops.shape(y)[1], ops.shape(updated[0][0])[2], query_offset=index)[None]
            return self.self_attention.attend(y, *updated[0], mask)

        cross_mask = None if encoder_padding_mask is None else ops.expand_dims(encoder_padding_mask, 1)

        def cached_cross_attention(y):
            # The rows of one sentence become more queries of that sentence: (sentences, rows_each · t, d).
            batch, steps = ops.shape(y)[0], ops.shape(y)[1]
            grouped = ops.reshape(y, (ops.shape(cross_key_value[0])[0], -1, y.shape[-1]))
            output, weights = self.cross_attention.attend(grouped, *cross_key_value, cross_mask)
            return ops.reshape(output, (batch, steps, output.shape[-1])), weights

        x, _, _ = self._sublayers(x_prime, cached_self_attention, cached_cross_attention)
        return x, updated[0]

    def _sublayers(self, x, self_attention, cross_attention, training=None):
        """The block's three sub-layers in order, each with its residual connection and layer norm; written once
        for `call` (whole sequences) and `decode_step` (a cache), which differ only in how they attend.
        `self_attention` and `cross_attention` map the sub-layer input to its output (and attention weights)."""
        x, self_weights = residual(x, self_attention, self.self_attention_norm, self.self_attention_dropout,
                                   self.normalize_first, training)
        x, cross_weights = residual(x, cross_attention, self.cross_attention_norm, self.cross_attention_dropout,
                                    self.normalize_first, training)
        x, _ = residual(x, self.feed_forward, self.feed_forward_norm, self.feed_forward_dropout, self.normalize_first,
                        training)
        return x, self_weights, cross_weights

    def compute_output_shape(self, x_prime_shape, u_shape):
        return x_prime_shape

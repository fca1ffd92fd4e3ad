import keras
from keras import ops

from kzoo.layers.decoder_block import DecoderBlock
from kzoo.layers.encoder_block import EncoderBlock
from kzoo.layers.position_embedding import PositionEmbedding
from kzoo.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from kzoo.layers.token_embedding import TokenEmbedding

POSITION_ENCODINGS = ("sinusoidal", "learned")


@keras.saving.register_keras_serializable(package="kzoo")
class Transformer(keras.Model):
    """The encoder-decoder Transformer, assembled with the functional API from kzoo's blocks.

    The encoder embeds the source tokens (scaled by √d_model), adds position information, and runs
    `num_encoder_layers` `EncoderBlock`s to give U. The decoder embeds the target tokens the same way and runs
    `num_decoder_layers` `DecoderBlock`s, each attending causally to the target prefix and to all of U. The output
    is one vector of logits over the target vocabulary per target position, in float32 whatever the dtype policy.

    Token id 0 is padding on both sides: it is masked out of every attention.

    Args:
        source_vocabulary_size: int. Source vocabulary size.
        target_vocabulary_size: int, optional. Target vocabulary size; defaults to `source_vocabulary_size`.
        num_encoder_layers: int. Defaults to 6.
        num_decoder_layers: int. Defaults to 6.
        hidden_dim: int. d_model. Defaults to 512.
        num_heads: int. Attention heads; must divide `hidden_dim`. Defaults to 8.
        intermediate_dim: int. d_ff. Defaults to 2048.
        dropout: float. Residual, embedding and attention dropout. Defaults to 0.1.
        max_sequence_length: int. The longest sequence the model takes (needed for learned positions).
            Defaults to 512.
        position_encoding: "sinusoidal" (the paper) or "learned". Defaults to "sinusoidal".
        share_embeddings: bool. One embedding matrix for source and target (they need the same, shared,
            vocabulary). Defaults to False.
        tie_output_embedding: bool. Use the target embedding matrix, transposed, as the output projection.
            Defaults to True.
        activation: feed-forward activation. Defaults to "relu".
        normalize_first: bool. Pre-LN blocks plus a final layer norm on each stack. Defaults to False (post-LN).
        layer_norm_epsilon: float. Defaults to 1e-5.
        dtype: dtype policy for the whole model, e.g. "mixed_bfloat16". Logits stay float32.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        encoder_token_ids: int tensor (batch, source_length).
        decoder_token_ids: int tensor (batch, target_length): the target shifted right (starting with a start
            token), as in teacher forcing.

    Outputs:
        float32 logits (batch, target_length, target_vocabulary_size).

    Example:
    ```python
    model = kzoo.models.Transformer(source_vocabulary_size=8000, num_encoder_layers=2, num_decoder_layers=2,
                                    hidden_dim=128, num_heads=4, intermediate_dim=512)
    logits = model({"encoder_token_ids": np.array([[5, 6, 7, 0]]), "decoder_token_ids": np.array([[1, 9, 0]])})
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762).
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size=None,
        num_encoder_layers=6,
        num_decoder_layers=6,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        max_sequence_length=512,
        position_encoding="sinusoidal",
        share_embeddings=False,
        tie_output_embedding=True,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        dtype=None,
        **kwargs,
    ):
        target_vocabulary_size = target_vocabulary_size or source_vocabulary_size
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(f"position_encoding={position_encoding!r} must be one of {POSITION_ENCODINGS}.")
        if share_embeddings and target_vocabulary_size != source_vocabulary_size:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary, but source_vocabulary_size={source_vocabulary_size} "
                f"and target_vocabulary_size={target_vocabulary_size}: build a joint vocabulary or set "
                "share_embeddings=False."
            )

        def embedding(vocabulary_size, name):
            return TokenEmbedding(vocabulary_size, hidden_dim, dtype=dtype, name=name)

        def positions(name):
            if position_encoding == "learned":
                return PositionEmbedding(max_sequence_length, dtype=dtype, name=name)
            return SinusoidalPositionEncoding(dtype=dtype, name=name)

        def block_kwargs(name):
            return dict(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                activation=activation,
                normalize_first=normalize_first,
                layer_norm_epsilon=layer_norm_epsilon,
                dtype=dtype,
                name=name,
            )

        def final_norm(name):
            if not normalize_first:
                return None
            return keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, dtype=dtype, name=name)

        # === Layers ===
        self.source_embedding = embedding(source_vocabulary_size, "source_embedding")
        self.target_embedding = (
            self.source_embedding if share_embeddings else embedding(target_vocabulary_size, "target_embedding")
        )
        self.source_positions = positions("source_positions")
        self.target_positions = positions("target_positions")
        self.source_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="source_embedding_dropout")
        self.target_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="target_embedding_dropout")
        self.encoder_blocks = [EncoderBlock(**block_kwargs(f"encoder_block_{i}")) for i in range(num_encoder_layers)]
        self.decoder_blocks = [DecoderBlock(**block_kwargs(f"decoder_block_{i}")) for i in range(num_decoder_layers)]
        self.encoder_output_norm = final_norm("encoder_output_norm")
        self.decoder_output_norm = final_norm("decoder_output_norm")
        self.output_projection = (
            None
            if tie_output_embedding
            else keras.layers.Dense(target_vocabulary_size, dtype=dtype, name="output_projection")
        )
        self.logits_cast = keras.layers.Activation("linear", dtype="float32", name="logits")

        # === Functional model ===
        encoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="encoder_token_ids")
        decoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="decoder_token_ids")
        u, encoder_padding_mask = self.encode(encoder_token_ids)
        logits = self.decode(decoder_token_ids, u, encoder_padding_mask)
        super().__init__(
            inputs={"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids},
            outputs=logits,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.position_encoding = position_encoding
        self.share_embeddings = share_embeddings
        self.tie_output_embedding = tie_output_embedding
        self.activation = activation
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon

    def _embed(self, token_ids, embedding, positions, dropout, start_index=0):
        x = embedding(token_ids)
        return dropout(x + positions(x, start_index=start_index))

    def _logits(self, x, output_kernel=None):
        if self.decoder_output_norm is not None:
            x = self.decoder_output_norm(x)
        if self.output_projection is not None:
            logits = self.output_projection(x)
        else:  # `output_kernel`: `initial_cache`'s, transposed once for every step (None: transposed here)
            logits = self.target_embedding(x, reverse=True, reverse_kernel=output_kernel)
        return self.logits_cast(logits)

    def encode(self, encoder_token_ids):
        """The encoder output U (batch, m, d) and the source padding mask (batch, m), True for real tokens."""
        padding_mask = ops.not_equal(encoder_token_ids, 0)
        u = self._embed(encoder_token_ids, self.source_embedding, self.source_positions, self.source_dropout)
        for block in self.encoder_blocks:
            u = block(u, padding_mask=padding_mask)
        if self.encoder_output_norm is not None:
            u = self.encoder_output_norm(u)
        return u, padding_mask

    def decode(self, decoder_token_ids, u, encoder_padding_mask, return_attention_scores=False):
        """Logits (batch, t, vocabulary) for every decoder position at once: teacher forcing, no cache.

        With `return_attention_scores`, also the attention weights of every decoder block, for drawing: a list of
        (self, cross) pairs, shaped (batch, heads, t, t) and (batch, heads, t, m).
        """
        padding_mask = ops.not_equal(decoder_token_ids, 0)
        x = self._embed(decoder_token_ids, self.target_embedding, self.target_positions, self.target_dropout)
        weights = []
        for block in self.decoder_blocks:
            x = block(x, u, decoder_padding_mask=padding_mask, encoder_padding_mask=encoder_padding_mask,
                      return_attention_scores=return_attention_scores)
            if return_attention_scores:
                x, self_weights, cross_weights = x
                weights.append((self_weights, cross_weights))
        return (self._logits(x), weights) if return_attention_scores else self._logits(x)

    def attention_weights(self, encoder_token_ids, decoder_token_ids):
        """The attention weights of every decoder block, for drawing: a list of (self, cross) pairs, shaped
        (batch, heads, t, t) and (batch, heads, t, m)."""
        u, encoder_padding_mask = self.encode(encoder_token_ids)
        return self.decode(decoder_token_ids, u, encoder_padding_mask, return_attention_scores=True)[1]

    def initial_cache(self, u, max_length=None):
        """The decoding state for `decode_step`: every decoder block's empty self-attention cache, and its encoder
        keys and values, computed once from U (batch, m, d).

        Without `max_length` the self-attention caches start with no positions and grow by one per step (a
        `GrowingCache`; a TensorFlow while loop carries them with an open length); with it they hold `max_length`
        positions from the start and keep their shapes, as a jit- or XLA-compiled step needs.

        With the output projection tied to the target embedding, the state also holds "output_kernel": that matrix
        transposed to (d, vocabulary), once, where the step would otherwise transpose it every time."""
        batch = ops.shape(u)[0]
        cache = {
            "self": [block.empty_cache(batch, max_length, self.compute_dtype) for block in self.decoder_blocks],
            "cross": [b.cross_attention.key_value(ops.cast(u, self.compute_dtype)) for b in self.decoder_blocks],
        }
        if self.output_projection is None:
            cache["output_kernel"] = self.target_embedding.reverse_kernel()
        return cache

    def decode_step(self, decoder_token_ids, index, cache, encoder_padding_mask):
        """Logits for the decoder positions index .. index + t - 1 given the cache of all earlier positions.

        Args:
            decoder_token_ids: int tensor (batch, t), usually t = 1: the newest tokens.
            index: int scalar tensor: the position of `decoder_token_ids[:, 0]`.
            cache: the state from `initial_cache` or the previous step. Its self-attention caches have a row per
                row of `decoder_token_ids`; its encoder keys and values may have one per sentence, shared by that
                sentence's consecutive rows (beam search's hypotheses).
            encoder_padding_mask: bool tensor (sentences, m), from `encode`.

        Returns:
            (float32 logits (batch, t, vocabulary), the updated cache). The logits equal those of `decode` on the
            whole prefix at these positions.
        """
        x = self._embed(
            decoder_token_ids, self.target_embedding, self.target_positions, self.target_dropout, start_index=index
        )
        caches = []
        for block, block_cache, cross_key_value in zip(self.decoder_blocks, cache["self"], cache["cross"]):
            x, block_cache = block.decode_step(x, index, block_cache, cross_key_value, encoder_padding_mask)
            caches.append(block_cache)
        return self._logits(x, cache.get("output_kernel")), {**cache, "self": caches}

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "num_encoder_layers": self.num_encoder_layers,
            "num_decoder_layers": self.num_decoder_layers,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_sequence_length,
            "position_encoding": self.position_encoding,
            "share_embeddings": self.share_embeddings,
            "tie_output_embedding": self.tie_output_embedding,
            "activation": self.activation,
            "normalize_first": self.normalize_first,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

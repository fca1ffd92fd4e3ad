"""The paper's base Transformer from kzoo and from keras-hub's layers, on one configuration, without TensorFlow, with
the analytic matmul FLOPs of a training step. benchmarks/bench_transformer.py (TensorFlow) and
benchmarks/gpu_jax.py (JAX) time them.

Both models have the same structure: post-LN blocks, separate source and target embeddings scaled by √d_model,
sinusoidal positions, embedding dropout, and the output projection tied to the target embedding.
"""

import math
from dataclasses import dataclass

import keras
import keras_hub
from keras import ops

import kzoo


@dataclass(frozen=True)
class Config:
    vocabulary_size: int = 8192
    num_layers: int = 6  # encoder blocks, and as many decoder blocks
    hidden_dim: int = 512
    num_heads: int = 8
    intermediate_dim: int = 2048
    dropout: float = 0.1
    batch_size: int = 64
    source_length: int = 32
    target_length: int = 32

    @property
    def tokens_per_step(self):
        """Source plus target tokens in one training batch."""
        return self.batch_size * (self.source_length + self.target_length)


# === Models ===


def build_kzoo(config, dtype):
    return kzoo.models.Transformer(
        source_vocabulary_size=config.vocabulary_size,
        num_encoder_layers=config.num_layers,
        num_decoder_layers=config.num_layers,
        hidden_dim=config.hidden_dim,
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        share_embeddings=False,
        tie_output_embedding=True,
        activation="relu",
        normalize_first=False,
        dtype=dtype,
        name="kzoo_transformer",
    )


def build_keras_hub(config, dtype):
    """The same Transformer from keras-hub's layers, with the functional API, mirroring kzoo's structure."""

    def embedding(name):
        return keras_hub.layers.ReversibleEmbedding(
            config.vocabulary_size,
            config.hidden_dim,
            tie_weights=True,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=config.hidden_dim**-0.5),
            dtype=dtype,
            name=name,
        )

    def embed(token_ids, token_embedding, name):
        x = ops.multiply(token_embedding(token_ids), math.sqrt(config.hidden_dim))
        x = x + keras_hub.layers.SinePositionEncoding(dtype=dtype, name=f"{name}_positions")(x)
        return keras.layers.Dropout(config.dropout, dtype=dtype, name=f"{name}_dropout")(x)

    block_kwargs = dict(
        intermediate_dim=config.intermediate_dim,
        num_heads=config.num_heads,
        dropout=config.dropout,
        activation="relu",
        normalize_first=False,
        dtype=dtype,
    )
    encoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="encoder_token_ids")
    decoder_token_ids = keras.Input(shape=(None,), dtype="int32", name="decoder_token_ids")
    encoder_padding_mask = ops.not_equal(encoder_token_ids, 0)
    decoder_padding_mask = ops.not_equal(decoder_token_ids, 0)
    target_embedding = embedding("target_embedding")

    u = embed(encoder_token_ids, embedding("source_embedding"), "source")
    for i in range(config.num_layers):
        u = keras_hub.layers.TransformerEncoder(**block_kwargs, name=f"encoder_block_{i}")(
            u, padding_mask=encoder_padding_mask
        )
    x = embed(decoder_token_ids, target_embedding, "target")
    for i in range(config.num_layers):
        x = keras_hub.layers.TransformerDecoder(**block_kwargs, name=f"decoder_block_{i}")(
            x, u, decoder_padding_mask=decoder_padding_mask, encoder_padding_mask=encoder_padding_mask
        )
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(target_embedding(x, reverse=True))
    return keras.Model(
        inputs={"encoder_token_ids": encoder_token_ids, "decoder_token_ids": decoder_token_ids},
        outputs=logits,
        name="keras_hub_transformer",
    )


BUILDERS = {"kzoo": build_kzoo, "keras-hub": build_keras_hub}


def training_flops_per_step(config):
    """Matmul FLOPs of one training step: forward (projections, QKᵀ, AV, feed-forward, output logits) times 3.

    A matmul of (m, k) by (k, n) counts 2·m·k·n FLOPs; the backward pass costs twice the forward. Embedding
    lookups, softmax, layer norms and element-wise work are not counted.
    """
    b, s, t = config.batch_size, config.source_length, config.target_length
    d, f, v = config.hidden_dim, config.intermediate_dim, config.vocabulary_size

    def attention(queries, keys):
        projections = 2 * b * (2 * queries + 2 * keys) * d * d  # W_Q and W_O on queries, W_K and W_V on keys
        scores_and_context = 2 * 2 * b * queries * keys * d  # QKᵀ and AV, all heads together
        return projections + scores_and_context

    def feed_forward(tokens):
        return 2 * 2 * b * tokens * d * f

    encoder = attention(s, s) + feed_forward(s)
    decoder = attention(t, t) + attention(t, s) + feed_forward(t)
    output_projection = 2 * b * t * d * v
    return 3 * (config.num_layers * (encoder + decoder) + output_projection)

import keras
from keras import ops

from kzoo.checkpoints.bert_checkpoint import load_checkpoint_weights, read_checkpoint
from kzoo.layers.encoder_block import EncoderBlock
from kzoo.layers.position_embedding import PositionEmbedding
from kzoo.layers.token_embedding import TokenEmbedding


@keras.saving.register_keras_serializable(package="kzoo")
class Bert(keras.Model):
    """The BERT encoder (Devlin et al. 2018), assembled with the functional API from kzoo's `EncoderBlock`s.

    Token, segment and learned position embeddings are summed, layer-normalized and dropped out, then pass through
    `num_layers` post-LN `EncoderBlock`s with the exact (erf) GELU. `sequence_output` is the last block's output;
    `pooled_output` is a tanh dense layer on the first ([CLS]) position, for sentence-level heads.

    Args:
        vocabulary_size: int. Defaults to 30522 (the released uncased vocabularies).
        num_layers: int. Encoder blocks.
        hidden_dim: int. Width of every position's vector.
        num_heads: int. Attention heads; must divide `hidden_dim`.
        intermediate_dim: int, optional. Feed-forward inner size; defaults to 4 × hidden_dim.
        dropout: float. Embedding, residual and attention dropout. Defaults to 0.1.
        max_sequence_length: int. Learned positions. Defaults to 512.
        num_segments: int. Segment (token type) ids. Defaults to 2.
        activation: feed-forward activation. Defaults to "gelu" (exact erf GELU, as BERT checkpoints use).
        layer_norm_epsilon: float. Defaults to 1e-12, as the original.
        initializer_range: float. Standard deviation of the truncated-normal initializer. Defaults to 0.02.
        dtype: dtype policy for the whole model, e.g. "mixed_bfloat16". Outputs stay in the compute dtype.
        **kwargs: `keras.Model` arguments such as `name`.

    Inputs:
        token_ids: int tensor (batch, seq).
        segment_ids: int tensor (batch, seq): 0 for sentence A, 1 for sentence B.
        padding_mask: bool or int tensor (batch, seq): True for real tokens.

    Outputs:
        A dict with `sequence_output` (batch, seq, hidden_dim) and `pooled_output` (batch, hidden_dim).

    Pretrained weights: `Bert.from_checkpoint(path)` builds the model a Hugging Face or Google BERT checkpoint
    describes and loads its weights (see `kzoo.checkpoints.bert_checkpoint`).

    Example:
    ```python
    model = kzoo.models.Bert(vocabulary_size=1000, num_layers=2, hidden_dim=64, num_heads=2)
    outputs = model({"token_ids": np.array([[2, 5, 6, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
                     "padding_mask": np.ones((1, 4), bool)})
    assert outputs["sequence_output"].shape == (1, 4, 64) and outputs["pooled_output"].shape == (1, 64)
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805).
    """

    def __init__(
        self,
        vocabulary_size=30522,
        num_layers=12,
        hidden_dim=768,
        num_heads=12,
        intermediate_dim=None,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        dtype=None,
        **kwargs,
    ):
        intermediate_dim = intermediate_dim or 4 * hidden_dim

        def initializer():
            return keras.initializers.TruncatedNormal(stddev=initializer_range)

        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size, hidden_dim, scale=False, embeddings_initializer=initializer(), dtype=dtype,
            name="token_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            num_segments, hidden_dim, embeddings_initializer=initializer(), dtype=dtype, name="segment_embedding"
        )
        self.position_embedding = PositionEmbedding(
            max_sequence_length, initializer=initializer(), dtype=dtype, name="position_embedding"
        )
        self.embeddings_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.encoder_blocks = [
            EncoderBlock(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer(),
                dtype=dtype,
                name=f"encoder_block_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooler = keras.layers.Dense(
            hidden_dim, activation="tanh", kernel_initializer=initializer(), dtype=dtype, name="pooler"
        )

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        x = self._embed(token_ids, segment_ids)
        mask = ops.cast(padding_mask, "bool")
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask)
        pooled = self.pooler(x[:, 0, :])
        super().__init__(
            inputs={"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            outputs={"sequence_output": x, "pooled_output": pooled},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    def _embed(self, token_ids, segment_ids):
        """Token + segment + position embeddings, normalized and dropped out: the first block's input."""
        x = self.token_embedding(token_ids) + self.segment_embedding(segment_ids)
        x = x + self.position_embedding(x)
        return self.embeddings_dropout(self.embeddings_norm(x))

    def attention_weights(self, inputs):
        """The self-attention weights of every encoder block for `inputs` (the model's own three inputs), at
        inference (no dropout): a list of `num_layers` float32 tensors (batch, heads, seq, seq), first block first.

        Row i of a head holds position i's weights over the positions j it attends to: they sum to 1 over the real
        tokens and are 0 at padding. They are the weights the model's own forward pass uses (the blocks are called
        as in `call`, asking each for its weights); `kzoo.models.attention_map` gives them for a text.

        Example:
        ```python
        model = kzoo.models.Bert(vocabulary_size=100, num_layers=2, hidden_dim=16, num_heads=2)
        inputs = {"token_ids": np.array([[2, 7, 9, 3, 0]]), "segment_ids": np.zeros((1, 5), "int32"),
                  "padding_mask": np.array([[1, 1, 1, 1, 0]])}
        weights = model.attention_weights(inputs)  # 2 tensors of shape (1, 2, 5, 5)
        np.testing.assert_allclose(np.asarray(weights[-1]).sum(-1), 1.0, atol=1e-6)  # every row sums to 1
        assert np.all(np.asarray(weights[-1])[..., 4] == 0.0)  # nobody attends to the padding
        ```
        """
        missing = sorted({"token_ids", "segment_ids", "padding_mask"} - set(inputs))
        if missing:
            raise ValueError(f"attention_weights needs the inputs token_ids, segment_ids and padding_mask; "
                             f"{', '.join(missing)} missing from {sorted(inputs)}.")
        x = self._embed(inputs["token_ids"], inputs["segment_ids"])
        mask = ops.cast(inputs["padding_mask"], "bool")
        weights = []
        for block in self.encoder_blocks:
            x, block_weights = block(x, padding_mask=mask, return_attention_scores=True)
            weights.append(ops.cast(block_weights, "float32"))
        return weights

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @classmethod
    def from_checkpoint(cls, path, **overrides):
        """A `Bert` with the configuration and weights of a BERT checkpoint.

        `path` is a Hugging Face folder (config.json, model.safetensors or pytorch_model.bin), a Google folder
        (bert_config.json, bert_model.ckpt.*), or the name of a published Google release such as
        "uncased_L-4_H-512_A-8", downloaded once (`kzoo.checkpoints.bert_releases`). `overrides` are `Bert` arguments
        other than sizes: `dropout`, `dtype`, `name`, `activation`. Missing, unexpected or misshapen tensors are
        errors; see `kzoo.checkpoints.bert_checkpoint`.
        """
        checkpoint = read_checkpoint(path)
        model = cls(**checkpoint.bert_arguments(**overrides))
        load_checkpoint_weights(model, checkpoint)
        return model

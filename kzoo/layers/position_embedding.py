import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class PositionEmbedding(keras.layers.Layer):
    """A learned position embedding: one trainable vector per position, up to `sequence_length` (as in BERT).

    Returns the embeddings for the positions of `x` (to be added to the token embeddings).

    Args:
        sequence_length: int. The longest sequence the layer can embed.
        initializer: initializer for the table. Defaults to "glorot_uniform".
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        x: tensor (batch, seq, d). Only its shape is used; seq must not exceed `sequence_length`.
        start_index: int or int tensor. Position of the first element of `x`. Defaults to 0.

    Example:
    ```python
    x = np.zeros((2, 10, 64))
    x = x + kzoo.layers.PositionEmbedding(sequence_length=128)(x)  # (2, 10, 64)
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805); [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762),
          section 3.5 (learned alternative).
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if int(sequence_length) <= 0:
            raise ValueError(f"sequence_length={sequence_length} must be a positive integer.")
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, x_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings", shape=(self.sequence_length, x_shape[-1]), initializer=self.initializer
        )

    def call(self, x, start_index=0):
        seq_length = x.shape[1]
        if seq_length is not None and seq_length > self.sequence_length:
            raise ValueError(
                f"The input has {seq_length} positions but sequence_length={self.sequence_length}: truncate the "
                "input or build the layer with a larger sequence_length."
            )
        embeddings = ops.slice(
            ops.convert_to_tensor(self.position_embeddings),
            (start_index, 0),
            (ops.shape(x)[1], self.position_embeddings.shape[-1]),
        )
        return ops.broadcast_to(embeddings, ops.shape(x))

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"sequence_length": self.sequence_length, "initializer": keras.initializers.serialize(self.initializer)}
        )
        return config

import keras
from keras import ops

from kzoo.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="kzoo")
class MaskedLMHead(keras.layers.Layer):
    """BERT's masked-language-model head, evaluated only at the masked positions.

    Gathers the encoder's vectors at `masked_positions`, transforms them (dense, activation, layer norm) and
    projects them to vocabulary logits with a bias. When `token_embedding` is given, the projection is the
    transposed token-embedding matrix (tied weights, as in BERT, Devlin et al. 2018, appendix A.2); otherwise the
    head owns its own output kernel. Logits are float32 whatever the dtype policy.

    Args:
        vocabulary_size: int. Size of the output vocabulary.
        token_embedding: `kzoo.layers.TokenEmbedding`, optional. The backbone's embedding to tie the projection
            to. Not part of `get_config()`: a model that ties the head rebuilds the link itself.
        activation: activation of the transform. Defaults to "gelu" (exact erf GELU, as BERT checkpoints use).
        layer_norm_epsilon: float. Defaults to 1e-12.
        kernel_initializer: initializer for the dense kernels. Defaults to TruncatedNormal(0.02).
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        sequence: float tensor (batch, seq, hidden).
        masked_positions: int tensor (batch, predictions): positions to predict. Unused slots may hold any valid
            position (0 by convention); the loss weighs them out.

    Example:
    ```python
    head = kzoo.layers.MaskedLMHead(vocabulary_size=1000)
    logits = head(np.random.rand(2, 16, 64), masked_positions=np.array([[3, 7], [1, 0]]))  # (2, 2, 1000)
    ```

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 3.1 "Task #1: Masked LM".
    """

    def __init__(
        self,
        vocabulary_size,
        token_embedding=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if token_embedding is not None and token_embedding.input_dim != vocabulary_size:
            raise ValueError(
                f"vocabulary_size={vocabulary_size} differs from the tied token_embedding's "
                f"{token_embedding.input_dim} rows; pass vocabulary_size={token_embedding.input_dim}."
            )
        self.vocabulary_size = vocabulary_size
        self.token_embedding = token_embedding
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, sequence_shape, masked_positions_shape=None):
        hidden_dim = sequence_shape[-1]
        self.dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.dense.build((None, None, hidden_dim))
        self.norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="transform_norm"
        )
        self.norm.build((None, None, hidden_dim))
        if self.token_embedding is None:
            self.output_kernel = self.add_weight(
                shape=(hidden_dim, self.vocabulary_size),
                initializer=clone_initializer(self.kernel_initializer),
                name="output_kernel",
            )
        self.output_bias = self.add_weight(shape=(self.vocabulary_size,), initializer="zeros", name="output_bias")

    def call(self, sequence, masked_positions):
        positions = ops.cast(masked_positions, "int32")
        x = ops.take_along_axis(sequence, ops.expand_dims(positions, -1), axis=1)  # (batch, predictions, hidden)
        x = self.norm(self.activation(self.dense(x)))
        if self.token_embedding is not None:
            logits = self.token_embedding(x, reverse=True)  # (batch, predictions, vocabulary)
        else:
            logits = ops.matmul(x, ops.cast(self.output_kernel, x.dtype))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_shape, masked_positions_shape):
        return (*masked_positions_shape, self.vocabulary_size)

    def compute_output_spec(self, sequence, masked_positions):
        return keras.KerasTensor(self.compute_output_shape(sequence.shape, masked_positions.shape), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config

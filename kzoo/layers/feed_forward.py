import keras

from kzoo.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="kzoo")
class FeedForward(keras.layers.Layer):
    """The position-wise feed-forward network: `W_2 act(W_1 x + b_1) + b_2`, applied to every position alike.

    Args:
        intermediate_dim: int. The inner size d_ff (2048 in the base Transformer).
        activation: activation between the two layers. Defaults to "relu"; BERT uses the exact (erf) "gelu".
        kernel_initializer: initializer for both kernels. Defaults to "glorot_uniform".
        bias_initializer: initializer for both biases. Defaults to "zeros".
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        x: float tensor (batch, seq, d). Returns the same shape.

    Masks: position-wise, so a Keras mask passes through unchanged.

    Example:
    ```python
    ffn = kzoo.layers.FeedForward(intermediate_dim=2048)
    y = ffn(np.random.rand(2, 10, 512))  # (2, 10, 512)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.3.
    """

    def __init__(
        self,
        intermediate_dim,
        activation="relu",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(intermediate_dim) <= 0:
            raise ValueError(f"intermediate_dim={intermediate_dim} must be a positive integer.")
        self.intermediate_dim = int(intermediate_dim)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, x_shape):
        def dense(units, name, activation=None):
            return keras.layers.Dense(
                units,
                activation=activation,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=name,
            )

        self.intermediate_dense = dense(self.intermediate_dim, "intermediate_dense", self.activation)  # W_1
        self.intermediate_dense.build(x_shape)
        self.output_dense = dense(x_shape[-1], "output_dense")  # W_2
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))

    def call(self, x):
        return self.output_dense(self.intermediate_dense(x))

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

import keras

from kzoo.layers.feed_forward import FeedForward
from kzoo.layers.initializers import clone_initializer
from kzoo.layers.multi_head import MultiHead


class TransformerBlock(keras.layers.Layer):
    """What `EncoderBlock` and `DecoderBlock` share: their arguments and the sub-layers they are made of.

    Subclasses build their sub-layers with `_multi_head`, `_feed_forward` and `_norm_and_dropout` and say in `call`
    how they are connected. The arguments are documented on the subclasses.

    Example:
    ```python
    from kzoo.layers.transformer_block import TransformerBlock

    block = kzoo.layers.EncoderBlock(num_heads=2, intermediate_dim=32, normalize_first=True)
    assert isinstance(block, TransformerBlock)
    config = block.get_config()  # the arguments TransformerBlock keeps for both kinds of block
    assert (config["num_heads"], config["intermediate_dim"], config["normalize_first"]) == (2, 32, True)
    ```
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        activation="relu",
        normalize_first=False,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(num_heads) <= 0:
            raise ValueError(f"num_heads={num_heads} must be a positive integer.")
        if int(intermediate_dim) <= 0:
            raise ValueError(f"intermediate_dim={intermediate_dim} must be a positive integer.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1).")
        self.num_heads = int(num_heads)
        self.intermediate_dim = int(intermediate_dim)
        self.dropout = dropout
        self.activation = keras.activations.get(activation)
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _multi_head(self, name, x_shape, x_prime_shape=None):
        hidden_dim = (x_prime_shape or x_shape)[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} is not divisible by num_heads={self.num_heads}: pick num_heads that "
                "divides the model width, or change the width."
            )
        layer = MultiHead(
            self.num_heads,
            hidden_dim // self.num_heads,
            dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )
        layer.build(x_shape, x_prime_shape)
        return layer

    def _feed_forward(self, x_shape):
        layer = FeedForward(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        layer.build(x_shape)
        return layer

    def _norm_and_dropout(self, name, x_shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=f"{name}_norm"
        )
        norm.build(x_shape)
        return norm, keras.layers.Dropout(self.dropout, dtype=self.dtype_policy, name=f"{name}_dropout")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "normalize_first": self.normalize_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

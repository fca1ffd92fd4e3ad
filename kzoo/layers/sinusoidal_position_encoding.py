import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The paper's fixed position encoding: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...).

    Returns the encodings for the positions of `x` (to be added to the token embeddings); it has no weights and
    works for any sequence length.

    Args:
        max_wavelength: float. The base of the geometric progression of wavelengths. Defaults to 10000.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        x: float tensor (batch, seq, d), d even. Only its shape and dtype are used.
        start_index: int or int tensor. Position of the first element of `x` (for decoding one step at a time).
            Defaults to 0.

    Example:
    ```python
    x = np.zeros((2, 10, 64))
    x = x + kzoo.layers.SinusoidalPositionEncoding()(x)  # (2, 10, 64)
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.5.
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        if max_wavelength <= 1:
            raise ValueError(f"max_wavelength={max_wavelength} must be greater than 1.")
        self.max_wavelength = max_wavelength
        self.supports_masking = True
        self.built = True

    def call(self, x, start_index=0):
        seq_length, hidden_dim = ops.shape(x)[1], x.shape[-1]
        if hidden_dim % 2:
            raise ValueError(f"hidden_dim={hidden_dim} must be even for sinusoidal position encoding.")
        positions = ops.cast(ops.arange(seq_length) + start_index, "float32")  # (seq,)
        even = ops.arange(0, hidden_dim, 2, dtype="float32")  # 2i
        frequencies = ops.power(float(self.max_wavelength), -even / hidden_dim)  # (d/2,)
        angles = positions[:, None] * frequencies[None, :]  # (seq, d/2)
        encoding = ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (seq_length, hidden_dim))
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), ops.shape(x))

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config

"""Activations that Keras offers only with a non-default argument, registered so that saved models find them."""

import keras


@keras.saving.register_keras_serializable(package="kzoo")
def gelu_approximate(x):
    """The tanh approximation of GELU, `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.

    Keras's "gelu" is the exact erf form, which BERT checkpoints in Hugging Face's "gelu" use; this is the form of
    Hugging Face's "gelu_new" / "gelu_pytorch_tanh" and of OpenAI's GPT. Pass the function itself:
    `kzoo.models.Bert(..., activation=kzoo.layers.gelu_approximate)`.

    Example:
    ```python
    x = np.array([-1.0, 0.0, 1.0], "float32")
    y = keras.ops.convert_to_numpy(kzoo.layers.gelu_approximate(x))
    np.testing.assert_allclose(y, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), rtol=1e-6)
    ```

    References:
        - [Hendrycks and Gimpel, 2016](https://arxiv.org/abs/1606.08415), section 2.
    """
    return keras.activations.gelu(x, approximate=True)

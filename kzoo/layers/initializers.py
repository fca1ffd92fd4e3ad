import keras


def clone_initializer(initializer):
    """A fresh copy of a Keras initializer (an instance, a name or a config), so that sibling weights never share
    one seeded instance.

    Example:
    ```python
    from kzoo.layers.initializers import clone_initializer

    original = keras.initializers.TruncatedNormal(stddev=0.02, seed=1)
    copy = clone_initializer(original)
    assert copy is not original and copy.get_config() == original.get_config()
    assert isinstance(clone_initializer("glorot_uniform"), keras.initializers.GlorotUniform)
    ```
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())

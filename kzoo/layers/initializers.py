import keras


def clone_initializer(initializer):
    """A fresh copy of a Keras initializer, so that sibling weights never share one seeded instance."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())

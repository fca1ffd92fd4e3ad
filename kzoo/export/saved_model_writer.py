"""Write a SavedModel that TF Serving's C++ loader restores whole, as a new numbered version."""

import tensorflow as tf

from kzoo.export.versioned_dir import write_version


def serving_root(models, **resources):
    """A `tf.Module` to save: the `tf.Variable`s inside the models' Keras variables, and `resources` (tokenizers).

    A Keras 3 variable (TensorFlow backend) is a wrapper around a `tf.Variable`. Saving the wrapper writes the
    variable under a new graph name ("Variable_12") that the restore op fills, while the serving function reads the
    wrapped `tf.Variable`'s own handle ("encoder_block_0/.../kernel"): Python's `tf.saved_model.load` matches the two
    through the object graph, but TF Serving's `LoadSavedModel` runs the restore op and then the function, which
    fails with "Could not find variable ...". Tracking the wrapped `tf.Variable`s themselves makes them one handle,
    restored once. `kzoo.serving.ContractLoader` checks exactly this, through TensorFlow's C API.

    Example:
    ```python
    from kzoo.export.saved_model_writer import serving_root

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    root = serving_root([model])
    assert [v.name for v in root.model_variables] == [v.value.name for v in model.variables]
    assert all(isinstance(v, tf.Variable) for v in root.model_variables)
    ```
    """
    root = tf.Module()
    variables = []
    for model in models:
        for variable in model.variables:
            value = variable.value
            if not isinstance(value, tf.Variable):
                raise TypeError(f"{variable.path} holds a {type(value).__name__}, not a tf.Variable: export outside "
                                "any autocast or stateless scope, with the TensorFlow backend.")
            variables.append(value)
    root.model_variables = variables
    for name, resource in resources.items():
        setattr(root, name, resource)
    return root


def write_saved_model(base_dir, version, serve, models, extra_files=None, **resources):
    """Save `serve` (a `tf.function` with an input signature) as `serving_default` in `base_dir/<version>/`.

    `models` are the Keras models `serve` calls, `resources` any other trackable it uses (tokenizers). With
    `version=None` the version is the next free one when the writing ends (a concurrent export into the same folder
    takes the other); it is written beside the target, made readable as any folder the user makes, and renamed into
    place; an existing version is never overwritten (see `kzoo.export.versioned_dir`). `extra_files` ({name: bytes})
    go into the version's assets.extra/, which TF Serving ignores (kzoo's translator records there what Python needs
    to load it). Returns the version's path.

    Example:
    ```python
    import stat
    from kzoo.export.saved_model_writer import write_saved_model

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    serve = tf.function(lambda x: {"y": model(x)}, input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    path = write_saved_model("models/dense", None, serve, [model])
    assert path.name == "1" and stat.S_IMODE(path.stat().st_mode) & 0o005 == 0o005  # others may read it
    restored = tf.saved_model.load(str(path)).signatures["serving_default"]
    np.testing.assert_allclose(restored(x=tf.ones((1, 3)))["y"], model(np.ones((1, 3))), atol=1e-6)
    ```
    """
    root = serving_root(models, **resources)
    root.serve = serve

    def write(staging):
        tf.saved_model.save(root, str(staging), signatures={"serving_default": serve})
        for name, data in (extra_files or {}).items():
            (staging / "assets.extra").mkdir(exist_ok=True)
            (staging / "assets.extra" / name).write_bytes(data)

    return write_version(base_dir, write, version)

"""Write a SavedModel that TF Serving's C++ loader restores whole, as a new numbered version."""

import pathlib

import tensorflow as tf

from kzoo.export.versioned_dir import new_version, next_version


def serving_root(models, **resources):
    """A `tf.Module` to save: the `tf.Variable`s inside the models' Keras variables, and `resources` (tokenizers).

    A Keras 3 variable (TensorFlow backend) is a wrapper around a `tf.Variable`. Saving the wrapper writes the
    variable under a new graph name ("Variable_12") that the restore op fills, while the serving function reads the
    wrapped `tf.Variable`'s own handle ("encoder_block_0/.../kernel"): Python's `tf.saved_model.load` matches the two
    through the object graph, but TF Serving's `LoadSavedModel` runs the restore op and then the function, which
    fails with "Could not find variable ...". Tracking the wrapped `tf.Variable`s themselves makes them one handle,
    restored once. `kzoo.serving.ContractLoader` checks exactly this, through TensorFlow's C API.
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

    `models` are the Keras models `serve` calls, `resources` any other trackable it uses (tokenizers). The version
    defaults to one more than the highest in `base_dir`; it is written beside the target and renamed into place, and
    an existing version is never overwritten (see `new_version`). `extra_files` ({name: bytes}) go into the version's
    assets.extra/, which TF Serving ignores (kzoo's translator records there what Python needs to load it). Returns
    the version's path.
    """
    version = next_version(base_dir) if version is None else version
    root = serving_root(models, **resources)
    root.serve = serve
    with new_version(base_dir, version) as staging:
        tf.saved_model.save(root, str(staging), signatures={"serving_default": serve})
        for name, data in (extra_files or {}).items():
            (staging / "assets.extra").mkdir(exist_ok=True)
            (staging / "assets.extra" / name).write_bytes(data)
    return pathlib.Path(base_dir) / str(version)

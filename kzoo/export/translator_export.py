"""Export a `Translator` as a SavedModel whose `serving_default` maps raw text to translated text."""

import tensorflow as tf

from kzoo.export.versioned_dir import new_version, next_version


def export_translator(translator, base_dir, version=None):
    """Write `translator` to `base_dir/<version>/` and return that path.

    The SavedModel's `serving_default` signature takes `text` (tf.string, [batch]) and returns `translation`
    (tf.string, [batch]); tokenization, decoding and detokenization are all in the graph, which needs TensorFlow and
    tensorflow-text ops only (import `tensorflow_text` before loading it in Python; TF Serving links those ops in).

    The `Translator` is a `tf.Module` that tracks the model and the tokenizer, so `tf.saved_model.save` writes each
    variable once; `keras.export.ExportArchive` wrote every weight twice (under `variables/` and `_all_variables/`),
    doubling the artifact.
    """
    version = next_version(base_dir) if version is None else version
    serve = tf.function(
        lambda text: {"translation": translator.translate_tensor(text)},
        input_signature=[tf.TensorSpec([None], tf.string, name="text")],
    )
    with new_version(base_dir, version) as staging:
        tf.saved_model.save(translator, str(staging), signatures={"serving_default": serve})
    return f"{base_dir}/{version}"

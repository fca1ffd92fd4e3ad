"""Export a `Translator` as a SavedModel whose `serving_default` maps raw text to translated text."""

import keras
import tensorflow as tf

from kzoo.export.versioned_dir import new_version, next_version


def export_translator(translator, base_dir, version=None):
    """Write `translator` to `base_dir/<version>/` and return that path.

    The SavedModel's `serving_default` signature takes `text` (tf.string, [batch]) and returns `translation`
    (tf.string, [batch]); tokenization, decoding and detokenization are all in the graph, which needs TensorFlow and
    tensorflow-text ops only (import `tensorflow_text` before loading it in Python; TF Serving links those ops in).
    """
    version = next_version(base_dir) if version is None else version
    archive = keras.export.ExportArchive()
    archive.track(translator.model)
    archive.track(translator.tokenizer)

    def serve(text):
        return {"translation": translator.translate_tensor(text)}

    archive.add_endpoint("serving_default", serve, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    with new_version(base_dir, version) as staging:
        archive.write_out(str(staging), verbose=False)
    return f"{base_dir}/{version}"


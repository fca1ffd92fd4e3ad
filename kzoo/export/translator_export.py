"""Export a `Translator` as a SavedModel whose `serving_default` maps raw text to translated text."""

import tensorflow as tf

from kzoo.export.saved_model_writer import write_saved_model


def export_translator(translator, base_dir, version=None):
    """Write `translator` to `base_dir/<version>/` and return that path.

    The SavedModel's `serving_default` signature takes `text` (tf.string, [batch]) and returns `translation`
    (tf.string, [batch]); tokenization, decoding and detokenization are all in the graph, which needs TensorFlow and
    tensorflow-text ops only (import `tensorflow_text` before loading it in Python; TF Serving links those ops in).
    Each variable is written once (`keras.export.ExportArchive` wrote every weight twice, doubling the artifact).
    """

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        return {"translation": translator.translate_tensor(tf.ensure_shape(text, [None]))}

    return write_saved_model(base_dir, version, serve, [translator.model], tokenizer=translator.tokenizer)

"""Export a `Translator` as a SavedModel whose `serving_default` maps raw text to translated text."""

import json

import tensorflow as tf

from kzoo.export.saved_model_writer import write_saved_model
from kzoo.translator import SETTINGS_FILE


def export_translator(translator, base_dir, version=None):
    """Write `translator` to `base_dir/<version>/` and return that path.

    The SavedModel's `serving_default` signature takes `text` (tf.string, [batch]) and returns `translation`
    (tf.string, [batch]); tokenization, decoding and detokenization are all in the graph, which needs TensorFlow and
    tensorflow-text ops only (import `tensorflow_text` before loading it in Python; TF Serving links those ops in).
    Each variable is written once (`keras.export.ExportArchive` wrote every weight twice, doubling the artifact).
    The version's assets.extra/ (which TF Serving ignores) holds translator.json (the decoding settings and the
    model's Keras config) and tokenizer.model, so that `kzoo.translator.Translator.load(version)` rebuilds the
    translator in Python, its weights read from the SavedModel's own variables.

    Example:
    ```python
    from kzoo.export import export_translator
    from kzoo.text import SubwordTokenizer
    from kzoo.translator import Translator

    english, german = kzoo.data.multi30k("val")
    tokenizer = SubwordTokenizer.train(english[:300] + german[:300], vocabulary_size=400)
    model = kzoo.models.Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1,
                                    hidden_dim=16, num_heads=2, intermediate_dim=32)
    translator = Translator(model, tokenizer, method="greedy", max_source_length=16)
    path = export_translator(translator, "saved_models/tiny_translator")  # saved_models/tiny_translator/1
    assert sorted(p.name for p in (path / "assets.extra").iterdir()) == ["tokenizer.model", "translator.json"]
    assert Translator.load(path).settings() == translator.settings()  # serves the same translations
    ```
    """

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        return {"translation": translator.translate_tensor(tf.ensure_shape(text, [None]))}

    description = json.dumps(translator.description(), indent=1) + "\n"
    extra_files = {SETTINGS_FILE: description.encode("utf-8"), "tokenizer.model": translator.tokenizer.model_proto}
    return write_saved_model(base_dir, version, serve, [translator.model], extra_files=extra_files,
                             tokenizer=translator.tokenizer)

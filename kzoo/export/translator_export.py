"""Export a `Translator` as a SavedModel whose `serving_default` maps raw text to translated text."""

import contextlib
import json

import tensorflow as tf

from kzoo.export.quantization import QUANTIZATIONS, QuantizedWeights, computing_in
from kzoo.export.saved_model_writer import write_saved_model
from kzoo.export.translator_warmup import warmup_file
from kzoo.serving.warmup import WARMUP_FILE
from kzoo.translator import SETTINGS_FILE, Translator


def export_translator(translator, base_dir, version=None, quantization=None, compute_dtype=None):
    """Write `translator` to `base_dir/<version>/` and return that path.

    The SavedModel's `serving_default` signature takes `text` (tf.string, [batch]) and returns `translation`
    (tf.string, [batch]); tokenization, decoding and detokenization are all in the graph, which needs TensorFlow and
    tensorflow-text ops only (import `tensorflow_text` before loading it in Python; TF Serving links those ops in).
    Each variable is written once (`keras.export.ExportArchive` wrote every weight twice, doubling the artifact).
    The version's assets.extra/ (which TF Serving ignores) holds translator.json (the decoding settings and the
    model's Keras config) and tokenizer.model, so that `kzoo.translator.Translator.load(version)` rebuilds the
    translator in Python, its weights read from the SavedModel's own variables.

    A translator with `jit_max_sentences` (beam-search sub-batches of at most that many sentences decode compiled by
    XLA) also gets assets.extra/tf_serving_warmup_requests: one request per compiled shape, which TF Serving replays
    at load, so no user request waits for a compile. TF Serving runs such a version only with
    `--xla_cpu_compilation_enabled=true`; TensorFlow's Python and C API loaders (kzoo's contract check) need no flag.

    `quantization="int8"` stores every weight matrix as int8 with a float32 scale per output channel (about a
    quarter of the size), `"bfloat16"` as bfloat16 (half); vectors stay float32. The graph dequantizes them once per
    request, before decoding (`kzoo.export.quantization.QuantizedWeights`), and decodes in `compute_dtype`:
    "float32" (the default for int8) or "bfloat16" (Keras's mixed_bfloat16: bfloat16 matmuls, float32 softmax and
    layer norms; the default for bfloat16). Only standard TensorFlow ops are added (Cast, Mul), so TF Serving runs
    it as it runs the float32 export. A quantized version's translator.json records the format under
    "quantization"; `Translator.load` reads it back, the weights dequantized to float32.

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

    if quantization not in (None, *QUANTIZATIONS):
        raise ValueError(f"quantization={quantization!r} is not a format kzoo exports: use one of {QUANTIZATIONS}, "
                         "or None for float32 weights.")
    compute_dtype = compute_dtype or ("bfloat16" if quantization == "bfloat16" else "float32")
    model = computing_in(translator.model, compute_dtype)
    if model is not translator.model:
        translator = Translator(model, translator.tokenizer, **translator.settings())
    weights = None if quantization is None else QuantizedWeights([model], quantization)
    reading = contextlib.nullcontext if weights is None else weights.scope

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        with reading():
            return {"translation": translator.translate_tensor(tf.ensure_shape(text, [None]))}

    description = translator.description()
    if weights is not None:
        description["quantization"] = {"weights": quantization, "compute_dtype": compute_dtype}
    extra_files = {SETTINGS_FILE: (json.dumps(description, indent=1) + "\n").encode("utf-8"),
                   "tokenizer.model": translator.tokenizer.model_proto}
    if translator.method == "beam" and translator.jit_max_sentences:
        extra_files[WARMUP_FILE] = warmup_file(translator)
    if weights is None:
        return write_saved_model(base_dir, version, serve, [model], extra_files=extra_files,
                                 tokenizer=translator.tokenizer)
    return write_saved_model(base_dir, version, serve, [], extra_files=extra_files, tokenizer=translator.tokenizer,
                             quantized_weights=weights.stored)

"""Strings in, strings out: a trained Transformer and its tokenizer, decoding inside compiled TensorFlow functions."""

import json
import pathlib

import tensorflow as tf

from kzoo.decoding import beam_search, decode_in_sub_batches, generate, greedy, sampler
from kzoo.decoding.fixed_shape_beam_search import compiled_beam_search
from kzoo.files import atomic_path, write_atomically
from kzoo.text import END, PAD, SubwordTokenizer

METHODS = ("beam", "greedy", "sample")
SETTINGS_FILE = "translator.json"  # a saved Translator's settings; in a SavedModel version, under assets.extra/
TOKENIZER_FILE = "tokenizer.model"
MODEL_FILE = "model.keras"
FORMAT = "kzoo.Translator"
CHARACTERS_PER_TOKEN = 16  # the longest piece of the shipped 8,000-piece vocabulary; text beyond is cut unread


def check_decoding(spell=None, **settings):
    """Raise one `ValueError` naming each of the decoding `settings` given (beam_size, length_penalty,
    early_stopping, jit_max_sentences, lanes) that `Translator` cannot take, with the fix; before any work, so
    `Translator` and `python -m kzoo.export` check them alike. `spell(name, value)` writes a setting as the caller's
    user typed it (default `name=value`; the export command passes its flags).

    Example:
    ```python
    from kzoo.translator import check_decoding

    check_decoding(beam_size=4, length_penalty=0.6, lanes=2)  # fine: returns None
    try:
        check_decoding(beam_size=0, lanes=1.5)
    except ValueError as error:
        assert "beam_size=0 must be a positive integer" in str(error) and "lanes=1.5" in str(error)
    ```
    """
    spell = spell or (lambda name, value: f"{name}={value!r}")
    unknown = set(settings) - set(DECODING_RULES)
    if unknown:
        raise TypeError(f"check_decoding got {sorted(unknown)}; it checks {sorted(DECODING_RULES)}.")
    problems = [f"{spell(name, value)} {fix}" for name, value in settings.items()
                for accepts, fix in [DECODING_RULES[name]] if not accepts(value)]
    if problems:
        raise ValueError("; ".join(problems) + ".")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


DECODING_RULES = {  # setting: (accepts(value), what a refused value must be); `check_decoding` applies them
    "beam_size": (lambda v: _is_int(v) and v >= 1, "must be a positive integer, such as 4"),
    "length_penalty": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
                       "must be 0 or more (0 scores plain log-probability), such as 0.6 or 1.0"),
    "early_stopping": (lambda v: isinstance(v, bool), "must be True or False"),
    "jit_max_sentences": (lambda v: _is_int(v) and v >= 0 and not v & (v - 1),
                          "must be 0 or a power of two (0 compiles nothing, N decodes sub-batches of up "
                          "to N sentences compiled), such as 8"),
    "lanes": (lambda v: _is_int(v) and v >= 1,
              "must be a positive integer: 1 decodes one sub-batch after another, the number of cores decodes one "
              "lane on each"),
}


class Translator(tf.Module):
    """Translate sentences with a `Transformer` and the `SubwordTokenizer` it was trained with.

    `translate_tensor` is the whole path as TensorFlow ops (tokenize, cut overlong input, decode, detokenize), so the
    same function runs from Python and inside an exported SavedModel, with the bounds a server needs:
    - a request of more than `max_sentences` sentences is refused (InvalidArgumentError naming the limit);
    - invalid UTF-8 in a sentence is replaced by U+FFFD (as `tf.strings.unicode_transcode(errors="replace")` does)
      before tokenizing, and the translations are always valid UTF-8;
    - a sentence is cut to `CHARACTERS_PER_TOKEN` · `max_source_length` characters before tokenizing, then to
      `max_source_length` tokens; overlong sentences are cut, never refused; an empty sentence gives an (often
      empty) string;
    - each sentence gets at most `max_output_factor` · its own source length + 10 output tokens;
    - sentences are sorted by length and decoded in sub-batches (`kzoo.decoding.decode_in_sub_batches`) of at most
      `max_positions` sentences × output limit, of limits within a factor 2, so one long sentence costs about its own
      length and does not slow the rest of its batch, and the decoder's memory is bounded whatever the request.

    `save(folder)` writes model.keras, tokenizer.model and translator.json (these settings); `Translator.load` reads
    such a folder, a translation run folder (`kzoo.train.translation_recipe`), or an exported translator (a
    SavedModel version, or the model folder holding numbered versions, whose newest it takes).

    Args:
        model: a trained `kzoo.models.Transformer`.
        tokenizer: the `kzoo.text.SubwordTokenizer` of its training data (source and target share it).
        method: "beam" (default), "greedy" or "sample".
        beam_size: int. Hypotheses kept by beam search. Defaults to 4.
        length_penalty: float. Beam search's length penalty α. Defaults to 0.6.
        early_stopping: bool. Beam search settles a sentence once `beam_size` of its hypotheses have finished
            (CTranslate2's rule; not exact) instead of when no alive one can beat its best
            (`kzoo.decoding.beam_search`). Defaults to False.
        max_source_length: int. Source tokens kept, end token included. Defaults to 128.
        max_output_factor: float. At most `max_output_factor · source length + 10` output tokens. Defaults to 1.5.
        sampling: dict of `kzoo.decoding.sampler` arguments (temperature, top_k, top_p, seed) for "sample".
        max_sentences: int. The most sentences one call (one request to the exported model) takes. Defaults to 512.
        max_positions: int. Sentences × output limit decoded at once, at most (a longer sentence goes alone).
            Defaults to 8192.
        jit_max_sentences: int, 0 or a power of two. Beam-search sub-batches of at most this many sentences decode
            compiled by XLA; 0 (the default) compiles nothing. Greedy and sampling decode dynamically whatever it is.
        lanes: int. Independent decoding lanes that run at the same time, each taking every lanes-th sentence by
            length (`decode_in_sub_batches`); 1 (the default) decodes one sub-batch after another. With as many
            lanes as cores, TensorFlow's inter-op threads keep every core busy on one large request; serve such a
            translator with one intra-op thread (TF Serving: `--tensorflow_intra_op_parallelism=1`), since two
            threads splitting each small op cost more than they save. Same translations whatever it is.

    Example:
    ```python
    from kzoo.text import SubwordTokenizer
    from kzoo.translator import Translator

    english, german = kzoo.data.multi30k("val")
    tokenizer = SubwordTokenizer.train(english[:300] + german[:300], vocabulary_size=400)
    model = kzoo.models.Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1,
                                    hidden_dim=16, num_heads=2, intermediate_dim=32)
    translator = Translator(model, tokenizer, method="greedy")
    translations = translator(["A dog runs on the beach."])  # an untrained model's German is noise
    translator.save("my_translator")
    assert Translator.load("my_translator")(["A dog runs on the beach."]) == translations
    ```
    """

    def __init__(self, model, tokenizer, method="beam", beam_size=4, length_penalty=0.6, max_source_length=128,
                 max_output_factor=1.5, sampling=None, max_sentences=512, max_positions=8192, jit_max_sentences=0,
                 lanes=1, early_stopping=False, name=None):
        super().__init__(name=name)
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not a decoding method; use one of {METHODS}.")
        check_decoding(beam_size=beam_size, length_penalty=length_penalty, early_stopping=early_stopping,
                       jit_max_sentences=jit_max_sentences, lanes=lanes)
        self.model = model
        self.tokenizer = tokenizer
        self.method = method
        self.beam_size = beam_size
        self.length_penalty = length_penalty
        self.early_stopping = early_stopping
        self.max_source_length = max_source_length
        self.max_output_factor = max_output_factor
        self.sampling = dict(sampling or {})
        self.max_sentences = max_sentences
        self.max_positions = max_positions
        self.jit_max_sentences = jit_max_sentences
        self.lanes = lanes
        self._jit_beam_search = None
        if method == "beam" and jit_max_sentences:
            self._jit_beam_search = compiled_beam_search(model, beam_size, length_penalty, self.output_limits,
                                                         jit_max_sentences, early_stopping)
        self._compiled = tf.function(self.translate_tensor, input_signature=[tf.TensorSpec([None], tf.string)])

    def settings(self):
        """The decoding settings, as `Translator`'s keyword arguments (what translator.json records)."""
        return {"method": self.method, "beam_size": self.beam_size, "length_penalty": self.length_penalty,
                "early_stopping": self.early_stopping, "max_source_length": self.max_source_length,
                "max_output_factor": self.max_output_factor, "sampling": dict(self.sampling),
                "max_sentences": self.max_sentences, "max_positions": self.max_positions,
                "jit_max_sentences": self.jit_max_sentences, "lanes": self.lanes}

    def output_limits(self, source_lengths):
        """The most output tokens (end token included) for sources of `source_lengths` tokens (end token included):
        `max_output_factor` · length + 10, as int32."""
        return tf.cast(self.max_output_factor * tf.cast(source_lengths, tf.float32), tf.int32) + 10

    def source_ids(self, texts):
        """Strings (batch,) to padded source ids (batch, m): the tokens, cut to fit, then the end token."""
        texts = tf.strings.substr(texts, 0, CHARACTERS_PER_TOKEN * self.max_source_length, unit="UTF8_CHAR")
        ids = self.tokenizer.tokenize(texts)[:, : self.max_source_length - 1]
        ends = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], END))
        return tf.concat([ids, ends], axis=1).to_tensor(default_value=PAD)

    def translate_tensor(self, texts, return_work=False):
        """Strings (batch,) to translated strings (batch,), as TensorFlow ops; with `return_work`, also the decoder
        positions computed (sentences × decoding steps, summed over sub-batches), the measure of a request's cost."""
        texts = tf.ensure_shape(tf.convert_to_tensor(texts, tf.string), [None])
        checked = tf.debugging.assert_less_equal(
            tf.size(texts), self.max_sentences,
            message=f"A request holds more sentences than this translator takes (max_sentences={self.max_sentences}):"
                    " split it into smaller requests. Sentences, limit:")
        with tf.control_dependencies([checked]):
            texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
        encoder_token_ids = self.source_ids(texts)
        limits = self.output_limits(tf.reduce_sum(tf.cast(tf.not_equal(encoder_token_ids, PAD), tf.int32), axis=1))
        if self.method == "beam":
            def decode(ids, limits):
                def dynamic():
                    return beam_search(self.model, ids, limits, self.beam_size, self.length_penalty,
                                       return_steps=True, early_stopping=self.early_stopping)
                if self._jit_beam_search is None:
                    return dynamic()
                return tf.cond(tf.shape(ids)[0] <= self.jit_max_sentences,
                               lambda: self._jit_beam_search(ids, limits), dynamic)
        else:
            pick = greedy() if self.method == "greedy" else sampler(**self.sampling)

            def decode(ids, limits):
                return generate(self.model, ids, limits, pick, return_steps=True)
        ids, work = decode_in_sub_batches(decode, encoder_token_ids, limits, self.max_positions, lanes=self.lanes)
        translations = tf.strings.unicode_transcode(self.tokenizer.detokenize(ids), "UTF-8", "UTF-8",
                                                    errors="replace")
        return (translations, work) if return_work else translations

    def __call__(self, texts):
        """A list of strings to a list of strings."""
        texts = list(texts)
        if not texts:
            return []
        return [t.decode("utf-8") for t in self._compiled(tf.constant(texts, tf.string)).numpy()]

    def translate(self, texts, batch_size=64):
        """Translate many sentences, `batch_size` at a time, sorted by length so batches pad little."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        results = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, translation in zip(chunk, self([texts[i] for i in chunk])):
                results[i] = translation
        return results

    def description(self):
        """translator.json's contents: the format, these settings, and the model's Keras config (which a SavedModel
        export needs, having no model.keras; its weights are the SavedModel's variables)."""
        import keras

        return {"format": FORMAT, "settings": self.settings(), "tokenizer": TOKENIZER_FILE,
                "model": keras.saving.serialize_keras_object(self.model)}

    def save(self, folder):
        """Write model.keras, tokenizer.model and translator.json into `folder`, which must be new or empty; the
        folder appears whole or not at all. `Translator.load(folder)` gives this translator back."""
        folder = pathlib.Path(folder)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise FileExistsError(f"{folder} exists and is not an empty folder: save the translator into a new one.")
        if folder.is_dir():
            folder.rmdir()
        with atomic_path(folder, directory=True) as temporary:
            self.model.save(temporary / MODEL_FILE)
            self.tokenizer.save(temporary / TOKENIZER_FILE)
            write_atomically(temporary / SETTINGS_FILE, json.dumps(self.description(), indent=1) + "\n")
        return folder

    @classmethod
    def load(cls, path, **overrides):
        """The translator in `path`: a folder `save` wrote, a translation run folder, an exported SavedModel version
        (with the assets.extra/translator.json kzoo's export writes), or a model folder of numbered versions (the
        newest is taken). `overrides` replace recorded settings, e.g. `method="greedy"`.

        Example:
        ```python
        from kzoo.translator import Translator

        shipped = Translator.load(kzoo.data.shipped_model("transformer_multi30k_en_de"), method="greedy")
        assert shipped.settings()["max_source_length"] == 128 and shipped.model.count_params() == 7_577_600
        # shipped(["A dog runs on the beach."]) gives German text
        ```
        """
        check_decoding(**{name: value for name, value in overrides.items() if name in DECODING_RULES})  # first
        path = pathlib.Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: pass a folder Translator.save wrote, a translation run "
                                    "folder, or an exported translator (a SavedModel version or its model folder).")
        if (path / SETTINGS_FILE).is_file():
            return cls._from_saved_folder(path, overrides)
        if (path / MODEL_FILE).is_file() and (path / TOKENIZER_FILE).is_file():
            return cls._from_run(path, overrides)
        if (path / "saved_model.pb").is_file():
            return cls._from_saved_model(path, overrides)
        versions = [p for p in path.iterdir() if p.is_dir() and p.name.isdigit()] if path.is_dir() else []
        if versions:
            return cls._from_saved_model(max(versions, key=lambda p: int(p.name)), overrides)
        raise ValueError(f"{path} holds no translator: expected {SETTINGS_FILE} (Translator.save), {MODEL_FILE} and "
                         f"{TOKENIZER_FILE} (a translation run), saved_model.pb (an exported version) or numbered "
                         "version folders.")

    @classmethod
    def _from_saved_folder(cls, path, overrides):
        keras = _keras_knowing_kzoo()

        description = _read_description(path / SETTINGS_FILE)
        model = keras.saving.load_model(path / MODEL_FILE, compile=False)
        return cls(model, SubwordTokenizer.load(path / description["tokenizer"]),
                   **{**description["settings"], **overrides})

    @classmethod
    def _from_run(cls, path, overrides):
        keras = _keras_knowing_kzoo()

        state = path / "run.json"
        if state.is_file() and json.loads(state.read_text()).get("status") != "finished":
            raise ValueError(f"{path} holds a run that did not finish ({state} says so): its files are not whole; "
                             "finish or resume the run first.")
        config = json.loads((path / "config.json").read_text()) if (path / "config.json").is_file() else {}
        recorded = {"beam_size": config.get("beam_size"), "length_penalty": config.get("length_penalty"),
                    "early_stopping": config.get("early_stopping"), "max_source_length": config.get("max_length")}
        settings = {name: value for name, value in recorded.items() if value is not None}
        model = keras.saving.load_model(path / MODEL_FILE, compile=False)  # no optimizer state for translating
        return cls(model, SubwordTokenizer.load(path / TOKENIZER_FILE), **{**settings, **overrides})

    @classmethod
    def _from_saved_model(cls, version, overrides):
        keras = _keras_knowing_kzoo()

        extra = version / "assets.extra"
        if not (extra / SETTINGS_FILE).is_file():
            raise ValueError(f"{version} is a SavedModel without {extra / SETTINGS_FILE}, which kzoo's translator "
                             "export writes: export the translator again with kzoo.export.export_translator.")
        description = _read_description(extra / SETTINGS_FILE)
        model = keras.saving.deserialize_keras_object(description["model"])
        _restore_saved_model_weights(model, version, (description.get("quantization") or {}).get("weights"))
        return cls(model, SubwordTokenizer.load(extra / description["tokenizer"]),
                   **{**description["settings"], **overrides})


def _keras_knowing_kzoo():
    """Keras, with kzoo's model and layer classes registered for its deserializer: a saved model names them
    ("kzoo>Transformer"), and Keras finds them only once their modules are imported, which nothing else in a fresh
    process (such as `python -m kzoo.export --run RUN`) may have done."""
    import keras

    import kzoo.models  # noqa: F401  (registers Transformer and the kzoo layers it is made of)

    return keras


def _read_description(path):
    try:
        description = json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path} is not JSON ({error}); it should be a translator description.") from None
    if not isinstance(description, dict) or description.get("format") != FORMAT:
        raise ValueError(f"{path} does not describe a kzoo translator (no \"format\": \"{FORMAT}\").")
    return description


def _restore_saved_model_weights(model, version, quantization=None):
    """Give `model` the weights of the SavedModel in `version`, matched by variable name, without loading its graph.

    kzoo's export saves the models' `tf.Variable`s as a list (`model_variables`), each under its Keras path; a
    quantized export (`quantization` "int8" or "bfloat16", as its translator.json records) saves them as
    `quantized_weights` instead, a matrix as PATH__int8 with PATH__scale, or PATH__bfloat16, which are read back here
    in float32 (the translator then decodes in float32, whatever compute dtype the export decodes in). The object
    graph in saved_model.pb names them and variables/ holds their values.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((version / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].object_graph_def
    children = {child.local_name: child.node_id for child in graph.nodes[0].children}
    root = "quantized_weights" if quantization else "model_variables"
    if root not in children:
        raise ValueError(f"{version} was not written by kzoo.export (its root has no {root}).")
    reader = tf.train.load_checkpoint(str(version / "variables" / "variables"))
    stored = {graph.nodes[child.node_id].variable.name: f"{root}/{child.local_name}/.ATTRIBUTES/VARIABLE_VALUE"
              for child in graph.nodes[children[root]].children}

    def stored_value(path):
        """The float value saved for the Keras weight at `path`, or None when the version does not hold it."""
        name = path.replace("/", "__") if quantization else path
        if name in stored:
            return reader.get_tensor(stored[name])
        if f"{name}__int8" in stored and f"{name}__scale" in stored:
            return (reader.get_tensor(stored[f"{name}__int8"]).astype("float32")
                    * reader.get_tensor(stored[f"{name}__scale"]))
        if f"{name}__bfloat16" in stored:
            return reader.get_tensor(stored[f"{name}__bfloat16"]).astype("float32")
        return None

    values = {weight.path: stored_value(weight.path) for weight in model.weights}
    missing = [path for path, value in values.items() if value is None]
    if missing:
        raise ValueError(f"{version} lacks {len(missing)} of the model's weights ({missing[:3]}...): the model config "
                         "in assets.extra does not describe these weights.")
    for weight in model.weights:
        value = values[weight.path]
        if tuple(value.shape) != tuple(weight.shape):
            raise ValueError(f"{version}: {weight.path} is saved with shape {value.shape}, the model wants "
                             f"{weight.shape}.")
        weight.assign(value)
    # The rest of the model's state (dropout's seed generators) comes back too, so that exporting a loaded version
    # again writes the same variables, byte for byte. Their paths carry a per-process counter (seed_generator_12),
    # so they are matched by position: the export lists `model.variables` in order.
    weights, shapes = {id(weight) for weight in model.weights}, reader.get_variable_to_shape_map()
    if not quantization and len(graph.nodes[children[root]].children) == len(model.variables):
        for position, variable in enumerate(model.variables):
            key = f"{root}/{position}/.ATTRIBUTES/VARIABLE_VALUE"
            if id(variable) not in weights and tuple(shapes.get(key, ())) == tuple(variable.shape):
                variable.assign(reader.get_tensor(key))

"""A kzoo `Transformer` and its `SubwordTokenizer` as a CTranslate2 model folder, and translation through it.

CTranslate2 (the OpenNMT runtime: C++ kernels, int8) has converters for OpenNMT, fairseq, Marian and Hugging Face
models, none for Keras; this fills its Python model spec (`ctranslate2.specs.TransformerSpec`) from the Keras
weights directly, as its converters fill it from PyTorch state dicts. ctranslate2 is an optional dependency
(`pip install kzoo[ctranslate2]`), imported only when these functions run.
"""

import numpy as np

from kzoo.files import atomic_path
from kzoo.models.transformer import Transformer
from kzoo.text import END, PAD, START, UNKNOWN

QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")
TOKENIZER_FILE = "sentencepiece.model"  # the SentencePiece model, copied into the folder beside model.bin


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError as error:
        raise ImportError("ctranslate2 is not installed: `pip install kzoo[ctranslate2]` (or "
                          "`pip install ctranslate2`).") from error
    return ctranslate2


def _activation(model, common_spec):
    import keras

    from kzoo.layers.activations import gelu_approximate

    activations = {keras.activations.relu: common_spec.Activation.RELU,
                   keras.activations.gelu: common_spec.Activation.GELU,  # Keras's "gelu" is the exact (erf) one
                   gelu_approximate: common_spec.Activation.GELUTanh,
                   keras.activations.silu: common_spec.Activation.SWISH}
    activation = keras.activations.get(model.activation)
    if activation not in activations:
        raise ValueError(f"activation={model.activation!r}: CTranslate2 runs relu, gelu, "
                         "kzoo.layers.gelu_approximate and silu in a Transformer's feed-forward network; this model "
                         "cannot be exported.")
    return activations[activation]


def _check(model, tokenizer, quantization):
    if not isinstance(model, Transformer):
        raise TypeError(f"model is a {type(model).__name__}; export_ctranslate2 takes a kzoo.models.Transformer.")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization={quantization!r} is not a CTranslate2 weight type; use None (the model's "
                         f"float32) or one of {QUANTIZATIONS}.")
    if tokenizer.vocabulary_size != model.source_vocabulary_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocabulary_size} pieces but the model's source vocabulary is "
                         f"{model.source_vocabulary_size}: pass the tokenizer the model was trained with.")
    if model.target_vocabulary_size != model.source_vocabulary_size:
        raise ValueError(f"target_vocabulary_size={model.target_vocabulary_size} differs from source_vocabulary_size="
                         f"{model.source_vocabulary_size}: kzoo's translators share one SentencePiece vocabulary, so "
                         "only models with one vocabulary can be exported.")


def _numpy(variable):
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable, dtype=np.float32)


def _linear(spec, kernel, bias):
    """A `LinearSpec` from a Keras kernel laid out (in, out); CTranslate2 stores (out, in)."""
    spec.weight = np.ascontiguousarray(kernel.T)
    if bias is not None:
        spec.bias = bias


def _fused(spec, pieces):
    """One `LinearSpec` for several projections of the same input (queries, keys, values), stacked as CTranslate2's
    converters fuse them (`converters.utils.fuse_linear`)."""
    spec.weight = np.ascontiguousarray(np.concatenate([kernel.T for kernel, _ in pieces]))
    if pieces[0][1] is not None:
        spec.bias = np.concatenate([bias for _, bias in pieces])


def _projection(attention, name):
    """The (d_in, heads·dim) kernel and (heads·dim,) bias of one of a `MultiHead`'s W_Q, W_K, W_V."""
    kernel = _numpy(getattr(attention, f"{name}_kernel"))
    bias = getattr(attention, f"{name}_bias")
    return kernel.reshape(kernel.shape[0], -1), None if bias is None else _numpy(bias).reshape(-1)


def _output(spec, attention):
    kernel = _numpy(attention.output_kernel)  # W_O: (heads, dim, d_out)
    bias = None if attention.output_bias is None else _numpy(attention.output_bias)
    _linear(spec, kernel.reshape(-1, kernel.shape[-1]), bias)


def _layer_norm(spec, norm):
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _self_attention(spec, attention, norm):
    _fused(spec.linear[0], [_projection(attention, name) for name in ("query", "key", "value")])
    _output(spec.linear[1], attention)
    _layer_norm(spec.layer_norm, norm)


def _cross_attention(spec, attention, norm):
    _fused(spec.linear[0], [_projection(attention, "query")])
    _fused(spec.linear[1], [_projection(attention, name) for name in ("key", "value")])
    _output(spec.linear[2], attention)
    _layer_norm(spec.layer_norm, norm)


def _feed_forward(spec, block):
    for linear, dense in ((spec.linear_0, block.feed_forward.intermediate_dense),
                          (spec.linear_1, block.feed_forward.output_dense)):
        _linear(linear, _numpy(dense.kernel), None if dense.bias is None else _numpy(dense.bias))
    _layer_norm(spec.layer_norm, block.feed_forward_norm)


def _positions(spec, model, positions, count):
    """kzoo's own position table for positions 0 .. count - 1: its sinusoids interleave sin and cos (CTranslate2's
    built-in table concatenates them), or the learned table (max_sequence_length rows, whatever `count`)."""
    if model.position_encoding == "learned":
        spec.encodings = _numpy(positions.position_embeddings)
        return
    zeros = np.zeros((1, count, model.hidden_dim), np.float32)
    spec.encodings = _numpy(positions(zeros))[0]


def _input_layers(spec, model, embedding, positions, count):
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _numpy(embedding.embeddings)
    spec.scale_embeddings = bool(embedding.scale)
    _positions(spec.position_encodings, model, positions, count)


def decoder_positions(model, max_output_factor=1.5):
    """How many target positions CTranslate2's table must hold for a kzoo `Transformer`: the longest output kzoo's
    `Translator` lets it write (`max_output_factor` · a source of `max_sequence_length` tokens + 10, end included).
    kzoo's sinusoids are computed for any position, so its decoder goes past `max_sequence_length` where a long
    source allows it (202 positions for 128), while CTranslate2 stops with "No position encodings are defined for
    positions >= ..." beyond its table.

    Example:
    ```python
    from kzoo.export.ctranslate2_export import decoder_positions

    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32, max_sequence_length=128)
    decoder_positions(model)  # 202
    ```
    """
    return output_limits([[None] * (model.max_sequence_length - 1)], max_output_factor)[0]


def transformer_spec(model, tokenizer):
    """The `ctranslate2.specs.TransformerSpec` of a kzoo `Transformer` (weights set, vocabulary registered, not yet
    validated or quantized); `export_ctranslate2` validates, quantizes and saves it.

    Example:
    ```python
    from kzoo.export.ctranslate2_export import transformer_spec

    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32, share_embeddings=True)
    try:
        spec = transformer_spec(model, tokenizer)
    except ImportError:  # ctranslate2 is optional: pip install kzoo[ctranslate2]
        spec = None
    assert spec is None or (spec.config.add_source_eos and spec.config.decoder_start_token == "<s>")
    ```
    """
    _ctranslate2()  # a clear error where it is not installed
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as specs

    _check(model, tokenizer, None)
    spec = specs.TransformerSpec.from_config(
        (model.num_encoder_layers, model.num_decoder_layers), model.num_heads, pre_norm=model.normalize_first,
        activation=_activation(model, common_spec))

    # Encoder: embeddings (scaled by √d), kzoo's positions, post-LN (or pre-LN) blocks.
    _input_layers(spec.encoder, model, model.source_embedding, model.source_positions, model.max_sequence_length)
    for layer, block in zip(spec.encoder.layer, model.encoder_blocks):
        _self_attention(layer.self_attention, block.self_attention, block.self_attention_norm)
        _feed_forward(layer.ffn, block)
    # Decoder: the same, with attention over the encoder output, and the output projection.
    _input_layers(spec.decoder, model, model.target_embedding, model.target_positions, decoder_positions(model))
    for layer, block in zip(spec.decoder.layer, model.decoder_blocks):
        _self_attention(layer.self_attention, block.self_attention, block.self_attention_norm)
        _cross_attention(layer.attention, block.cross_attention, block.cross_attention_norm)
        _feed_forward(layer.ffn, block)
    if model.normalize_first:
        _layer_norm(spec.encoder.layer_norm, model.encoder_output_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder_output_norm)
    if model.output_projection is None:  # tied: the target embedding matrix, unscaled, is already (vocabulary, d)
        spec.decoder.projection.weight = _numpy(model.target_embedding.embeddings)
    else:
        _linear(spec.decoder.projection, _numpy(model.output_projection.kernel),
                _numpy(model.output_projection.bias) if model.output_projection.use_bias else None)

    # kzoo's source is the tokens then the end id; its decoder starts from the start id and stops at the end id.
    pieces = tokenizer.pieces(list(range(tokenizer.vocabulary_size)))
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = pieces[UNKNOWN], pieces[START], pieces[END]
    spec.config.decoder_start_token = pieces[START]
    spec.config.add_source_bos, spec.config.add_source_eos = False, True
    spec.config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def export_ctranslate2(model, tokenizer, output_dir, quantization=None):
    """Write a kzoo `Transformer` and its `SubwordTokenizer` as a CTranslate2 model folder; returns its path.

    The folder holds CTranslate2's `model.bin`, `config.json` and `shared_vocabulary.json` (the SentencePiece pieces
    in id order), and the tokenizer's `sentencepiece.model`; `ctranslate2.Translator(output_dir)` loads it, and
    `translate_ctranslate2` translates text with it as `kzoo.translator.Translator` does. The mapping: post-LN
    blocks (`pre_norm=False`; pre-LN models get CTranslate2's pre-norm blocks and final norms), embeddings scaled by
    √d_model, kzoo's own position tables (its sinusoids interleave sin and cos: `max_sequence_length` source
    positions, and target positions for the longest output kzoo writes, `decoder_positions`), queries, keys and
    values fused into one projection, the tied output projection, the layer-norm epsilon, and kzoo's special tokens:
    the end token appended to the source, decoding from the start token.

    The folder is written under a temporary name and renamed into place, so a reader never sees half of it; an
    existing `output_dir` is never overwritten.

    Args:
        model: a `kzoo.models.Transformer` with one vocabulary for source and target (as kzoo's translators have).
        tokenizer: the `kzoo.text.SubwordTokenizer` the model was trained with.
        output_dir: str or path. The folder to create; it must not exist.
        quantization: str, optional. CTranslate2's weight type, one of `QUANTIZATIONS` ("int8", "int8_float32",
            "int16", "float16", ...). Defaults to None: float32 weights (CTranslate2 can still quantize them when it
            loads the folder, `compute_type="int8"`).

    Example:
    ```python
    from kzoo.export.ctranslate2_export import export_ctranslate2

    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32, share_embeddings=True)
    try:
        path = export_ctranslate2(model, tokenizer, "dog_ct2", quantization="int8")
    except ImportError:  # ctranslate2 is optional: pip install kzoo[ctranslate2]
        path = None
    assert path is None or sorted(p.name for p in path.iterdir()) == [
        "config.json", "model.bin", "sentencepiece.model", "shared_vocabulary.json"]
    ```
    """
    import pathlib

    output_dir = pathlib.Path(output_dir)
    _check(model, tokenizer, quantization)
    if output_dir.exists():
        raise FileExistsError(f"{output_dir} exists: export_ctranslate2 never overwrites a model folder; pass a new "
                              "path or remove the old folder first.")
    spec = transformer_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    with atomic_path(output_dir, directory=True) as temporary:
        spec.save(str(temporary))
        tokenizer.save(temporary / TOKENIZER_FILE)
    return output_dir


def source_pieces(tokenizer, texts, max_source_length=128):
    """The SentencePiece pieces of each text, cut as `kzoo.translator.Translator` cuts its source (to
    `max_source_length - 1` tokens: CTranslate2 appends the end token, as kzoo does).

    Example:
    ```python
    from kzoo.export.ctranslate2_export import source_pieces

    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    pieces = source_pieces(tokenizer, ["A dog runs.", ""], max_source_length=3)
    assert len(pieces[0]) == 2 and pieces[1] == [] and tokenizer.pieces([1, 2]) == ["<s>", "</s>"]
    ```
    """
    ids = tokenizer.tokenize(list(texts))[:, : max_source_length - 1].to_list()
    return [tokenizer.pieces(row) if row else [] for row in ids]


def output_limits(source_pieces_, max_output_factor=1.5):
    """kzoo's per-sentence output limit, `max_output_factor · (source tokens + end) + 10`, end token included.

    Example:
    ```python
    from kzoo.export.ctranslate2_export import output_limits

    assert output_limits([["▁A", "▁dog", "."], []]) == [16, 11]  # 1.5 · 4 + 10 and 1.5 · 1 + 10, rounded down
    ```
    """
    return [int(np.float32(max_output_factor) * np.float32(len(pieces) + 1)) + 10 for pieces in source_pieces_]


def ctranslate2_length_penalty(alpha):
    """CTranslate2's `length_penalty` that picks about the translations kzoo's beam search picks with GNMT's `alpha`.

    kzoo divides a hypothesis's log-probability by ((5 + L) / 6)^alpha, CTranslate2 by (L + 1)^a (its end token
    counted). The two agree on which of two nearly equal hypotheses wins where their slopes in L agree,
    alpha / (5 + L) = a / (L + 1), so a = alpha (L + 1) / (L + 5), which is 0.75 alpha at L = 11 subwords, the length
    of a typical Multi30k German sentence. For kzoo's default alpha = 0.6 that is 0.45, which gives the same
    translation for about 98% of the test sentences (tests/export/test_ctranslate2_export.py).

    Example:
    ```python
    from kzoo.export.ctranslate2_export import ctranslate2_length_penalty

    ctranslate2_length_penalty(0.6), ctranslate2_length_penalty(1.0)  # (0.45, 0.75)
    ```
    """
    return round(0.75 * alpha, 4)


def ctranslate2_beam_options(translator):
    """The `beam_size` and `length_penalty` with which `ctranslate2_ids` and `translate_ctranslate2` decode as the
    kzoo `Translator` `translator` does (its beam size; `ctranslate2_length_penalty` of its GNMT alpha).

    Example:
    ```python
    from kzoo.export.ctranslate2_export import ctranslate2_beam_options

    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    options = ctranslate2_beam_options(kzoo.translator.Translator(model, tokenizer, beam_size=5, length_penalty=1.0))
    assert options == {"beam_size": 5, "length_penalty": 0.75}
    ```
    """
    return {"beam_size": translator.beam_size, "length_penalty": ctranslate2_length_penalty(translator.length_penalty)}


def ctranslate2_ids(translator, tokenizer, texts, beam_size=4, length_penalty=0.45, max_source_length=128,
                    max_output_factor=1.5, max_batch_size=64):
    """Translate `texts` with a `ctranslate2.Translator` and return each best hypothesis as kzoo token ids, without
    the end token; the limits are `kzoo.translator.Translator`'s, so greedy ids (`beam_size=1`) equal kzoo's.

    CTranslate2 takes one output limit per call: it decodes to the batch's largest limit and each greedy hypothesis
    is cut to its own sentence's, which is exactly what stopping there gives; beam search runs again, with its own
    limit, for each sentence that reached it (rare for a trained model). CTranslate2's length
    penalty divides log-probabilities by length^α (the end token counted); kzoo's beam search uses GNMT's
    ((5 + length) / 6)^α, and α = 0.45 here picks the same translation as kzoo's default α = 0.6 for about 98% of
    Multi30k test sentences.

    Example:
    ```python
    from kzoo.export.ctranslate2_export import ctranslate2_ids, export_ctranslate2

    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32, share_embeddings=True)
    try:
        import ctranslate2
        translator = ctranslate2.Translator(str(export_ctranslate2(model, tokenizer, "dog_ct2")))
        ids = ctranslate2_ids(translator, tokenizer, ["A dog."], beam_size=1)
        assert len(ids) == 1 and 0 < len(ids[0]) <= 1.5 * 4 + 10  # random weights: it runs to the limit
    except ImportError:  # ctranslate2 is optional: pip install kzoo[ctranslate2]
        pass
    ```
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1.")
    texts = list(texts)
    if not texts:
        return []
    pieces = source_pieces(tokenizer, texts, max_source_length)
    limits = output_limits(pieces, max_output_factor)
    vocabulary = {piece: i for i, piece in enumerate(tokenizer.pieces(list(range(tokenizer.vocabulary_size))))}
    end = tokenizer.pieces([END])[0]
    options = dict(beam_size=beam_size, length_penalty=length_penalty, max_input_length=0, min_decoding_length=0,
                   return_end_token=True, max_batch_size=max_batch_size)

    def decode(rows, limit):
        """{row: ids} for the given rows decoded with at most `limit` tokens, end token included."""
        results = translator.translate_batch([pieces[i] for i in rows], max_decoding_length=limit, **options)
        return {i: result.hypotheses[0] for i, result in zip(rows, results)}

    ids, at_limit = {}, {}
    order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))  # batches of similar length pad little
    for start in range(0, len(order), max_batch_size):
        chunk = order[start : start + max_batch_size]
        for i, hypothesis in decode(chunk, max(limits[i] for i in chunk)).items():
            if end in hypothesis[: limits[i]]:
                ids[i] = hypothesis[: hypothesis.index(end)]
            elif beam_size == 1:  # greedy: the first tokens are the same whatever the limit
                ids[i] = hypothesis[: limits[i] - 1]
            else:
                at_limit.setdefault(limits[i], []).append(i)
    # Beam search over a sentence that reaches its own limit: kzoo makes every hypothesis end there, so search again
    # with that limit (CTranslate2 ends the hypotheses alive at its limit).
    for limit, rows in at_limit.items():
        for i, hypothesis in decode(rows, limit - 1).items():
            ids[i] = hypothesis[: hypothesis.index(end)] if end in hypothesis else hypothesis
    ids = {i: [vocabulary.get(piece, UNKNOWN) for piece in tokens] for i, tokens in ids.items()}
    return [ids[i] for i in range(len(texts))]


def translate_ctranslate2(translator, tokenizer, texts, beam_size=4, length_penalty=0.45, max_source_length=128,
                          max_output_factor=1.5, max_batch_size=64):
    """Strings to translated strings through a `ctranslate2.Translator`: tokenized and detokenized by the kzoo
    `SubwordTokenizer`, decoded by CTranslate2 (arguments as `ctranslate2_ids`'s).

    Example:
    ```python
    from kzoo.export.ctranslate2_export import export_ctranslate2, translate_ctranslate2

    tokenizer = kzoo.text.SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    model = kzoo.models.Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32, share_embeddings=True)
    try:
        import ctranslate2
        translator = ctranslate2.Translator(str(export_ctranslate2(model, tokenizer, "dog_ct2")), intra_threads=1)
        assert [type(t) for t in translate_ctranslate2(translator, tokenizer, ["A dog.", ""])] == [str, str]
    except ImportError:  # ctranslate2 is optional: pip install kzoo[ctranslate2]
        pass
    ```
    """
    import tensorflow as tf

    ids = ctranslate2_ids(translator, tokenizer, texts, beam_size, length_penalty, max_source_length,
                          max_output_factor, max_batch_size)
    if not ids:
        return []
    ragged = tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1, inner_shape=())
    return [t.decode("utf-8") for t in tokenizer.detokenize(ragged.to_tensor(default_value=PAD)).numpy()]

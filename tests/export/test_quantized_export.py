"""Quantized translator exports: weights stored as int8 (per-channel scales) or bfloat16, read back once per request,
decoded by the same decoder, served as TF Serving loads them."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from tiny_translator import tiny_translator

from kzoo.data import multi30k
from kzoo.export import export_translator
from kzoo.export.__main__ import main
from kzoo.export.quantization import QuantizedWeights, computing_in, int8_quantize
from kzoo.serving.check import check_contract
from kzoo.train.run import Run

FORMATS = {"int8": tf.int8, "bfloat16": tf.bfloat16}


@pytest.fixture(scope="module")
def translator():
    return tiny_translator(3, method="greedy", max_source_length=16)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, translator):
    folder = tmp_path_factory.mktemp("exports")
    paths = {None: export_translator(translator, folder / "float32")}
    for quantization in FORMATS:
        paths[quantization] = export_translator(translator, folder / quantization, quantization=quantization)
    return paths


def saved_tensors(path):
    """{name in the checkpoint: (dtype, shape)} of a SavedModel version's variables."""
    reader = tf.train.load_checkpoint(str(path / "variables" / "variables"))
    shapes = reader.get_variable_to_shape_map()
    return {name: (dtype, tuple(shapes[name])) for name, dtype in reader.get_variable_to_dtype_map().items()
            if name.startswith("quantized_weights/") or name.startswith("model_variables/")}


def served(path, texts):
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    return [t.decode("utf-8") for t in serve(text=tf.constant(texts, tf.string))["translation"].numpy()]


def test_int8_values_are_within_half_a_scale_with_one_scale_per_output_channel():
    value = np.random.default_rng(0).normal(size=(16, 3, 8)).astype("float32")
    value[:, 1, 2] = 0.0  # an all-zero channel
    values, scale = int8_quantize(tf.constant(value), axes=[0])
    assert values.dtype == tf.int8 and scale.shape == (1, 3, 8)
    assert np.abs(values.numpy()).max() == 127 and not values.numpy()[:, 1, 2].any()
    error = np.abs(values.numpy() * scale.numpy() - value)
    assert (error <= scale.numpy() / 2 + 1e-7).all() and error.max() > 0


def test_every_matrix_is_stored_quantized_once_and_vectors_stay_float32(translator):
    model = translator.model
    weights = QuantizedWeights([model], "int8")
    by_name = {v.name.split(":")[0]: v for v in weights.stored}
    shapes = {v.path: tuple(v.shape) for v in model.variables}
    # Tied source/target/output embedding: one matrix, one int8 copy with a scale per token.
    assert [name for name in by_name if "embeddings" in name] == ["source_embedding__embeddings__int8",
                                                                   "source_embedding__embeddings__scale"]
    assert by_name["source_embedding__embeddings__scale"].shape == (model.source_vocabulary_size, 1)
    # MultiHead's (d, heads, k) query kernel: one scale per head and channel; its output kernel: per output channel.
    attention = "decoder_block_0__self_attention__"
    assert by_name[attention + "query_kernel__scale"].shape == (1, 2, 8)
    assert by_name[attention + "output_kernel__scale"].shape == (1, 1, 16)
    for path, shape in shapes.items():
        name = path.replace("/", "__")
        if len(shape) >= 2:
            assert by_name[name + "__int8"].dtype == tf.int8 and tuple(by_name[name + "__int8"].shape) == shape
        elif name in by_name:
            assert by_name[name].dtype in (tf.float32, tf.int64)
    assert sum(len(v.shape) >= 2 and v.dtype == tf.float32 and not v.name.endswith("scale:0")
               for v in weights.stored) == 0


def test_teacher_forced_logits_read_through_the_scope_stay_close(translator):
    model = translator.model
    ids = {"encoder_token_ids": np.array([[5, 17, 42, 9, 2]]), "decoder_token_ids": np.array([[1, 33, 71, 12]])}
    exact = model(ids).numpy()
    for quantization, tolerance in (("int8", 0.03), ("bfloat16", 0.02)):
        with QuantizedWeights([model], quantization).scope():
            approximate = model(ids).numpy()
        error = np.abs(approximate - exact).max() / exact.std()
        assert 0 < error < tolerance, (quantization, error)


@pytest.mark.parametrize("quantization", sorted(FORMATS))
def test_the_saved_model_holds_only_the_quantized_matrices(exports, quantization):
    float32, quantized = saved_tensors(exports[None]), saved_tensors(exports[quantization])
    matrices = sorted(shape for dtype, shape in float32.values() if len(shape) >= 2)
    stored = sorted(shape for dtype, shape in quantized.values() if dtype == FORMATS[quantization])
    assert matrices and stored == matrices
    # The only float32 tensors of rank 2 or more left are int8's scales, each spanning a matrix's input axes.
    scales = [shape for dtype, shape in quantized.values() if dtype == tf.float32 and len(shape) >= 2]
    assert len(scales) == (len(matrices) if quantization == "int8" else 0) and all(1 in shape for shape in scales)

    def data_bytes(path):
        return sum(f.stat().st_size for f in (path / "variables").glob("variables.data-*"))

    assert data_bytes(exports["int8"]) < data_bytes(exports["bfloat16"]) < 0.6 * data_bytes(exports[None])
    description = json.loads((exports[quantization] / "assets.extra" / "translator.json").read_text())
    compute = "float32" if quantization == "int8" else "bfloat16"
    assert description["quantization"] == {"weights": quantization, "compute_dtype": compute}


@pytest.mark.parametrize("quantization", sorted(FORMATS))
def test_quantized_exports_mostly_translate_as_float32_and_meet_the_contract(exports, translator, quantization):
    english = multi30k("test_2016_flickr")[0][:40]
    reference = translator(english)
    assert served(exports[None], english) == reference
    same = sum(a == b for a, b in zip(served(exports[quantization], english), reference))
    assert same >= 26, f"{quantization}: {same}/40 greedy translations equal float32's"
    assert check_contract(exports[quantization]) == []


@pytest.mark.parametrize("quantization", sorted(FORMATS))
def test_a_quantized_version_loads_as_a_translator_with_its_dequantized_weights(exports, translator, quantization):
    from kzoo.translator import Translator

    loaded = Translator.load(exports[quantization])
    with QuantizedWeights([translator.model], quantization).scope():
        expected = [keras.ops.convert_to_numpy(value) for value in translator.model.weights]
    for weight, value in zip(loaded.model.weights, expected):  # the stored form, read back in float32
        np.testing.assert_allclose(np.asarray(weight), value.astype("float32"), rtol=0, atol=1e-6)
    english = multi30k("test_2016_flickr")[0][:12]
    if quantization == "int8":  # decoded in float32 like the export, so the same strings
        assert loaded(english) == served(exports["int8"], english)


def test_bad_formats_are_refused_by_name(tmp_path, translator):
    with pytest.raises(ValueError, match=r"quantization='int4'.*'int8', 'bfloat16'"):
        export_translator(translator, tmp_path / "x", quantization="int4")
    with pytest.raises(ValueError, match=r"quantization='float16'"):
        QuantizedWeights([translator.model], "float16")
    with pytest.raises(ValueError, match=r"compute_dtype='float16'.*'float32', 'bfloat16'"):
        computing_in(translator.model, "float16")
    assert not (tmp_path / "x").exists()


def test_the_cli_exports_a_translation_run_quantized(tmp_path, translator, capsys):
    run = tmp_path / "run"
    with Run(run, "kzoo.train.translation_recipe", {"beam_size": 2, "length_penalty": 0.6, "max_length": 16}):
        translator.model.save(run / "model.keras")
        translator.tokenizer.save(run / "tokenizer.model")
    main(["--run", str(run), "--output", str(tmp_path / "int8"), "--quantize", "int8", "--compute-dtype", "bfloat16"])
    path = tmp_path / "int8" / "1"
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(path)
    description = json.loads((path / "assets.extra" / "translator.json").read_text())
    assert description["quantization"] == {"weights": "int8", "compute_dtype": "bfloat16"}
    assert description["settings"]["beam_size"] == 2
    assert {dtype for dtype, _ in saved_tensors(path).values()} >= {tf.int8}
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(tmp_path), "--output", str(tmp_path / "e"), "--quantize", "int8"])
    assert "apply to translation runs" in capsys.readouterr().err


@pytest.mark.slow  # about 7 minutes at load 9 on 2 cores: four passes over test_2016_flickr with beam 4
def test_shipped_weights_quantized_keep_bleu_within_0_3(tmp_path):
    import tensorflow_text  # noqa: F401  (the SentencePiece ops of the loaded graphs)

    from kzoo.data import shipped_model
    from kzoo.serving.model_config import saved_model_versions
    from kzoo.train.quality import translation_scores
    from kzoo.translator import Translator

    version = saved_model_versions(shipped_model("transformer_multi30k_en_de"))[-1]  # what TF Serving serves
    english, german = multi30k("test_2016_flickr")
    order = sorted(range(len(english)), key=lambda i: len(english[i]))
    shipped = Translator.load(version)
    models = {"float32": version}
    for quantization, compute_dtype in (("int8", "float32"), ("int8", "bfloat16"), ("bfloat16", "bfloat16")):
        models[quantization, compute_dtype] = export_translator(shipped, tmp_path / f"{quantization}_{compute_dtype}",
                                                                quantization=quantization, compute_dtype=compute_dtype)
    bleu = {}
    for name, path in models.items():
        serve = tf.saved_model.load(str(path)).signatures["serving_default"]
        out = [None] * len(english)
        for start in range(0, len(order), 64):
            rows = order[start : start + 64]
            texts = tf.constant([english[i] for i in rows], tf.string)
            for i, text in zip(rows, serve(text=texts)["translation"].numpy()):
                out[i] = text.decode("utf-8")
        bleu[name] = translation_scores(out, german)["bleu"]
    assert bleu["float32"] == 39.43  # the newest version's test score, as its model card gives it
    assert all(abs(score - bleu["float32"]) <= 0.3 for score in bleu.values()), bleu

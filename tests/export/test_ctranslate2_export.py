"""kzoo.export.export_ctranslate2: kzoo's Transformer run by CTranslate2 decodes as kzoo does, in float32.

The shipped translator's weights on the first test_2016_flickr sentences (all 1,000 in the slow test), and random
models for the other architectures kzoo's Transformer can have."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import multi30k, shipped_model
from kzoo.decoding import generate
from kzoo.export import export_ctranslate2
from kzoo.export.ctranslate2_export import (
    ctranslate2_beam_options,
    ctranslate2_ids,
    ctranslate2_length_penalty,
    output_limits,
    source_pieces,
    transformer_spec,
    translate_ctranslate2,
)
from kzoo.layers import gelu_approximate
from kzoo.models import Transformer
from kzoo.text import END, PAD, SubwordTokenizer
from kzoo.translator import Translator

ctranslate2 = pytest.importorskip("ctranslate2")

SUBSET = 40  # test_2016_flickr sentences in the default suite: one batch


def kzoo_greedy_ids(translator, texts):
    """kzoo's greedy ids with `translator`'s source cut and per-sentence limits, each cut at its end token."""

    @tf.function
    def greedy(texts):
        source = translator.source_ids(texts)
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, PAD), tf.float32), axis=1)
        return generate(translator.model, source, tf.cast(translator.max_output_factor * lengths, tf.int32) + 10)

    ids = greedy(tf.constant(texts)).numpy()
    return [[int(t) for t in row[: list(row).index(END)]] for row in ids]  # at its limit, a sentence is made to end


@pytest.fixture(scope="module")
def shipped():
    return Translator.load(shipped_model("transformer_multi30k_en_de"))


@pytest.fixture(scope="module")
def folder(shipped, tmp_path_factory):
    return export_ctranslate2(shipped.model, shipped.tokenizer, tmp_path_factory.mktemp("ct2") / "float32")


@pytest.fixture(scope="module")
def sentences():
    return multi30k("test_2016_flickr")[0][:SUBSET]


def load(folder):
    """A `ctranslate2.Translator` on one thread: CTranslate2's OpenMP threads slow down badly on a shared machine."""
    return ctranslate2.Translator(str(folder), intra_threads=1)


def random_model(tokenizer, **config):
    """A small random model whose weights are spread wide, so its greedy choices depend on its input and on every
    weight (a freshly initialised model repeats one token)."""
    keras.utils.set_random_seed(5)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=2, num_decoder_layers=1, hidden_dim=16,
                        num_heads=4, intermediate_dim=24, share_embeddings=True, **config)
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.5, weight.shape).astype("float32"))
    return model


def test_folder_holds_ctranslate2s_files_and_kzoos_special_tokens(folder, shipped):
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "model.bin", "sentencepiece.model", "shared_vocabulary.json"]
    config = json.loads((folder / "config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>", "<unk>")
    assert config["decoder_start_token"] == "<s>" and config["add_source_eos"] and not config["add_source_bos"]
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    vocabulary = json.loads((folder / "shared_vocabulary.json").read_text())
    assert len(vocabulary) == 8000 and vocabulary == shipped.tokenizer.pieces(list(range(8000)))
    assert (folder / "sentencepiece.model").read_bytes() == shipped.tokenizer.model_proto
    # One matrix for both embeddings and the output projection (CTranslate2 aliases equal weights), so the file holds
    # the Keras model's parameters once, and the two position tables kzoo's sinusoids give.
    model = shipped.model
    floats = model.count_params() + 2 * model.max_sequence_length * model.hidden_dim
    assert 4 * model.count_params() < (folder / "model.bin").stat().st_size < 4 * floats + 200_000


def test_greedy_ids_equal_kzoos(shipped, folder, sentences):
    kzoo_ids = kzoo_greedy_ids(shipped, sentences)
    served = load(folder)
    assert ctranslate2_ids(served, shipped.tokenizer, sentences, beam_size=1) == kzoo_ids
    # Batching does not change a translation.
    assert ctranslate2_ids(served, shipped.tokenizer, sentences[:5], beam_size=1, max_batch_size=2) == kzoo_ids[:5]


def test_the_length_penalty_maps_gnmt_alpha_to_ctranslate2s():
    assert [ctranslate2_length_penalty(alpha) for alpha in (0.0, 0.6, 1.0)] == [0.0, 0.45, 0.75]


def test_beam_search_strings_equal_kzoos_for_at_least_97_percent(shipped, folder, sentences):
    served = load(folder)
    strings = translate_ctranslate2(served, shipped.tokenizer, sentences, **ctranslate2_beam_options(shipped))
    assert sum(a == b for a, b in zip(strings, shipped(sentences))) >= 0.97 * len(sentences)
    assert strings[0] == "Ein Mann mit einem orangefarbenen Hut starrt auf etwas."


def test_int8_weights_are_smaller_and_translate_alike(shipped, folder, sentences, tmp_path):
    quantized = export_ctranslate2(shipped.model, shipped.tokenizer, tmp_path / "int8", quantization="int8")
    assert (quantized / "model.bin").stat().st_size < 0.4 * (folder / "model.bin").stat().st_size
    float32 = translate_ctranslate2(load(folder), shipped.tokenizer, sentences)
    int8 = translate_ctranslate2(load(quantized), shipped.tokenizer, sentences)
    assert sum(a == b for a, b in zip(float32, int8)) >= 0.7 * len(sentences)


def test_output_is_cut_at_kzoos_per_sentence_limit(shipped, tmp_path):
    # The random model rarely picks the end token, so sentences run to their own limits, in one batch.
    model = random_model(shipped.tokenizer)
    texts = ["A dog.", "Two men are playing football on a field near the river.", "A"]
    pieces = source_pieces(shipped.tokenizer, texts, max_source_length=6)
    assert [len(p) for p in pieces] == [min(5, len(shipped.tokenizer.tokenize([t])[0])) for t in texts]
    kzoo_ids = kzoo_greedy_ids(Translator(model, shipped.tokenizer, method="greedy", max_source_length=6), texts)
    served = load(export_ctranslate2(model, shipped.tokenizer, tmp_path / "ct2"))
    ids = ctranslate2_ids(served, shipped.tokenizer, texts, beam_size=1, max_source_length=6)
    assert ids == kzoo_ids
    assert [len(row) for row in ids] == [limit - 1 for limit in output_limits(pieces)]  # then kzoo's forced end


def test_outputs_longer_than_the_models_max_sequence_length_decode_as_kzoos(shipped, tmp_path):
    # kzoo's sinusoids hold for any position, so a source of max_sequence_length tokens may be answered with
    # 1.5 x that + 10 (here 22 for 8); CTranslate2's table must hold as many target positions, or it stops with
    # "No position encodings are defined for positions >= 8" (as it did for the shipped version 9 and 128).
    model = random_model(shipped.tokenizer, max_sequence_length=8)
    texts = ["Two men are playing football on a field near the river.", "A dog."]
    kzoo_ids = kzoo_greedy_ids(Translator(model, shipped.tokenizer, method="greedy", max_source_length=8), texts)
    served = load(export_ctranslate2(model, shipped.tokenizer, tmp_path / "ct2"))
    ids = ctranslate2_ids(served, shipped.tokenizer, texts, beam_size=1, max_source_length=8)
    assert ids == kzoo_ids and len(ids[0]) == output_limits([[None] * 7])[0] - 1 == 21
    assert ctranslate2_ids(served, shipped.tokenizer, texts, beam_size=4, max_source_length=8)[0]  # beam search too


@pytest.mark.parametrize("config", [
    dict(normalize_first=True, activation="gelu", position_encoding="learned", max_sequence_length=64),
    dict(tie_output_embedding=False, activation=gelu_approximate, layer_norm_epsilon=1e-3),
])
def test_other_architectures_decode_as_kzoo_does(shipped, config, sentences, tmp_path):
    model = random_model(shipped.tokenizer, **config)
    texts = sentences[:12]
    kzoo_ids = kzoo_greedy_ids(Translator(model, shipped.tokenizer, method="greedy", max_source_length=20), texts)
    assert len({tuple(ids) for ids in kzoo_ids}) > 6  # the outputs differ from sentence to sentence
    served = load(export_ctranslate2(model, shipped.tokenizer, tmp_path / "ct2"))
    assert ctranslate2_ids(served, shipped.tokenizer, texts, beam_size=1, max_source_length=20) == kzoo_ids


def test_bad_inputs_are_refused_before_any_work(shipped, folder, tmp_path):
    model, tokenizer = shipped.model, shipped.tokenizer
    with pytest.raises(FileExistsError, match="never overwrites"):
        export_ctranslate2(model, tokenizer, folder)
    with pytest.raises(ValueError, match="quantization='int3'"):
        export_ctranslate2(model, tokenizer, tmp_path / "x", quantization="int3")
    with pytest.raises(TypeError, match="kzoo.models.Transformer"):
        export_ctranslate2(keras.Sequential([keras.layers.Dense(2)]), tokenizer, tmp_path / "x")
    small = SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    with pytest.raises(ValueError, match="the tokenizer has 300 pieces but the model's source vocabulary is 8000"):
        export_ctranslate2(model, small, tmp_path / "x")
    with pytest.raises(ValueError, match="activation="):
        transformer_spec(Transformer(300, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, num_heads=2,
                                     intermediate_dim=8, share_embeddings=True, activation="tanh"), small)
    with pytest.raises(ValueError, match="beam_size=0"):
        ctranslate2_ids(None, tokenizer, ["A dog."], beam_size=0)
    assert not (tmp_path / "x").exists()
    assert ctranslate2_ids(None, tokenizer, []) == [] and translate_ctranslate2(None, tokenizer, []) == []


# Version 8: beam 4, alpha 0.6 (CTranslate2 0.45), the weights issue 20's 97% was set on: 981 strings equal. Version 9:
# beam 5, alpha 1.0 (0.75), whose stronger length penalty the mapping matches less often: 959 equal (val: 984 of
# 1,014; 0.6, 0.85 and 1.0 gave 961, 962 and 930 there), and its BLEU within 0.3 all the same. Version 11 (new
# weights, beam 4, alpha 0.8, as version 10): 977 equal, CTranslate2's BLEU 39.35.
@pytest.mark.slow  # 0.5-4 minutes a version, by the machine: kzoo's greedy and beam search over 1,000 sentences
@pytest.mark.parametrize("version, equal, expected_bleu", [("8", 970, 38.15), ("9", 955, 39.75), ("10", 970, 39.72),
                                                           ("11", 970, 39.43)])
def test_shipped_translator_on_all_of_test_2016_flickr(version, equal, expected_bleu, tmp_path):
    from kzoo.train.quality import translation_scores

    shipped = Translator.load(shipped_model("transformer_multi30k_en_de") / version)
    english, german = multi30k("test_2016_flickr")
    served = load(export_ctranslate2(shipped.model, shipped.tokenizer, tmp_path / "float32"))
    kzoo_ids = [ids for start in range(0, len(english), 100)
                for ids in kzoo_greedy_ids(shipped, english[start : start + 100])]
    assert ctranslate2_ids(served, shipped.tokenizer, english, beam_size=1) == kzoo_ids
    kzoo_strings = shipped.translate(english)
    strings = translate_ctranslate2(served, shipped.tokenizer, english, **ctranslate2_beam_options(shipped))
    assert sum(a == b for a, b in zip(strings, kzoo_strings)) >= equal
    kzoo_bleu, bleu = (translation_scores(hypotheses, german)["bleu"] for hypotheses in (kzoo_strings, strings))
    assert kzoo_bleu == pytest.approx(expected_bleu, abs=0.01) and abs(bleu - kzoo_bleu) <= 0.3

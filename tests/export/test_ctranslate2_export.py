"""kzoo.export.export_ctranslate2: a kzoo Transformer run by CTranslate2 decodes as kzoo does, in float32."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import multi30k
from kzoo.decoding import generate
from kzoo.export import export_ctranslate2
from kzoo.export.ctranslate2_export import (ctranslate2_ids, output_limits, source_pieces, transformer_spec,
                                            translate_ctranslate2)
from kzoo.models import Transformer
from kzoo.text import END, PAD, SubwordTokenizer, encode_pairs
from kzoo.translator import Translator

ctranslate2 = pytest.importorskip("ctranslate2")

TRAIN_PAIRS = 3000
TEST_SENTENCES = 64


def kzoo_greedy_ids(model, translator, texts):
    """kzoo's greedy ids with its Translator's source cut and per-sentence limits, each cut at its end token."""
    source = translator.source_ids(tf.constant(texts))
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, PAD), tf.float32), axis=1)
    limits = tf.cast(translator.max_output_factor * lengths, tf.int32) + 10
    ids = generate(model, source, limits).numpy()
    return [[int(t) for t in row[: list(row).index(END)]] for row in ids]  # at its limit, a sentence is made to end


@pytest.fixture(scope="module")
def tokenizer():
    english, german = multi30k("train")
    return SubwordTokenizer.train(english[:TRAIN_PAIRS] + german[:TRAIN_PAIRS], vocabulary_size=800)


@pytest.fixture(scope="module")
def trained(tokenizer):
    """A 1+1-block model trained for a few dozen steps on Multi30k (one padded shape, so one traced step): it has
    learned how captions start and where they end, enough that beam search has real choices to make."""
    english, german = multi30k("train")
    encoder, decoder, labels = (ids.to_tensor(default_value=PAD, shape=[None, 24]) for ids in
                                encode_pairs(tokenizer, english[:TRAIN_PAIRS], german[:TRAIN_PAIRS], max_length=24))
    keras.utils.set_random_seed(11)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32,
                        num_heads=2, intermediate_dim=64, share_embeddings=True, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD))
    model.fit({"encoder_token_ids": encoder, "decoder_token_ids": decoder}, labels, batch_size=60,
              steps_per_epoch=TRAIN_PAIRS // 60, shuffle=False, verbose=0)
    return model


@pytest.fixture(scope="module")
def folder(trained, tokenizer, tmp_path_factory):
    return export_ctranslate2(trained, tokenizer, tmp_path_factory.mktemp("ct2") / "float32")


@pytest.fixture(scope="module")
def test_sentences():
    return multi30k("test_2016_flickr")[0][:TEST_SENTENCES]


def test_folder_holds_ctranslate2s_files_and_kzoos_special_tokens(folder, tokenizer):
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "model.bin", "sentencepiece.model", "shared_vocabulary.json"]
    config = json.loads((folder / "config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>", "<unk>")
    assert config["decoder_start_token"] == "<s>" and config["add_source_eos"] and not config["add_source_bos"]
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    vocabulary = json.loads((folder / "shared_vocabulary.json").read_text())
    assert vocabulary == tokenizer.pieces(list(range(tokenizer.vocabulary_size)))
    assert (folder / "sentencepiece.model").read_bytes() == tokenizer.model_proto


def test_greedy_ids_equal_kzoos(trained, tokenizer, folder, test_sentences):
    kzoo_ids = kzoo_greedy_ids(trained, Translator(trained, tokenizer, method="greedy"), test_sentences)
    served = ctranslate2.Translator(str(folder), intra_threads=2)
    assert ctranslate2_ids(served, tokenizer, test_sentences, beam_size=1) == kzoo_ids
    # Batching does not change a translation, and the text matches kzoo's greedy translator's.
    assert ctranslate2_ids(served, tokenizer, test_sentences[:5], beam_size=1, max_batch_size=2) == kzoo_ids[:5]
    assert (translate_ctranslate2(served, tokenizer, test_sentences[:8], beam_size=1)
            == Translator(trained, tokenizer, method="greedy")(test_sentences[:8]))


def test_beam_search_strings_equal_kzoos_for_at_least_97_percent(trained, tokenizer, folder, test_sentences):
    kzoo_strings = Translator(trained, tokenizer, method="beam", beam_size=4).translate(test_sentences)
    served = ctranslate2.Translator(str(folder), intra_threads=2)
    strings = translate_ctranslate2(served, tokenizer, test_sentences, beam_size=4)
    assert sum(a == b for a, b in zip(strings, kzoo_strings)) >= 0.97 * len(test_sentences)


def test_output_is_cut_at_kzoos_per_sentence_limit(tokenizer, tmp_path):
    # A random model never picks the end token, so every sentence runs to its own limit, in one batch.
    keras.utils.set_random_seed(3)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
                        num_heads=2, intermediate_dim=32, share_embeddings=True)
    texts = ["A dog.", "Two men are playing football on a field near the river.", "A"]
    pieces = source_pieces(tokenizer, texts, max_source_length=6)
    assert [len(p) for p in pieces] == [min(5, len(tokenizer.tokenize([t])[0])) for t in texts]
    limits = output_limits(pieces)
    kzoo_ids = kzoo_greedy_ids(model, Translator(model, tokenizer, method="greedy", max_source_length=6), texts)
    served = ctranslate2.Translator(str(export_ctranslate2(model, tokenizer, tmp_path / "ct2")))
    ids = ctranslate2_ids(served, tokenizer, texts, beam_size=1, max_source_length=6)
    assert ids == kzoo_ids
    assert [len(row) for row in ids] == [limit - 1 for limit in limits]  # then kzoo's forced end token


@pytest.mark.parametrize("variant", [
    dict(normalize_first=True, activation="gelu", position_encoding="learned", max_sequence_length=64),
    dict(tie_output_embedding=False, activation="relu", layer_norm_epsilon=1e-3),
])
def test_other_architectures_decode_as_kzoo_does(tokenizer, variant, test_sentences, tmp_path):
    keras.utils.set_random_seed(5)
    model = Transformer(tokenizer.vocabulary_size, num_encoder_layers=2, num_decoder_layers=1, hidden_dim=16,
                        num_heads=4, intermediate_dim=24, share_embeddings=True, **variant)
    # Spread the weights so the random model's greedy choices depend on its input and its every weight.
    for weight in model.weights:
        weight.assign(np.random.default_rng(0).normal(0, 0.5, weight.shape).astype("float32"))
    texts = test_sentences[:12]
    kzoo_ids = kzoo_greedy_ids(model, Translator(model, tokenizer, method="greedy", max_source_length=20), texts)
    print(len({tuple(ids) for ids in kzoo_ids}))
    served = ctranslate2.Translator(str(export_ctranslate2(model, tokenizer, tmp_path / "ct2")))
    assert ctranslate2_ids(served, tokenizer, texts, beam_size=1, max_source_length=20) == kzoo_ids


def test_int8_weights_are_smaller_and_translate_alike(trained, tokenizer, folder, test_sentences,
                                                                    tmp_path):
    quantized = export_ctranslate2(trained, tokenizer, tmp_path / "int8", quantization="int8")
    # A quarter of the bytes for the matrices; kzoo's position tables stay float32.
    assert (quantized / "model.bin").stat().st_size < 0.55 * (folder / "model.bin").stat().st_size
    float32_ids = ctranslate2_ids(ctranslate2.Translator(str(folder)), tokenizer, test_sentences, beam_size=1)
    int8_ids = ctranslate2_ids(ctranslate2.Translator(str(quantized)), tokenizer, test_sentences, beam_size=1)
    assert sum(a == b for a, b in zip(float32_ids, int8_ids)) >= 0.5 * len(test_sentences)


def test_bad_inputs_are_refused_before_any_work(trained, tokenizer, folder, tmp_path):
    with pytest.raises(FileExistsError, match="never overwrites"):
        export_ctranslate2(trained, tokenizer, folder)
    with pytest.raises(ValueError, match="quantization='int3'"):
        export_ctranslate2(trained, tokenizer, tmp_path / "x", quantization="int3")
    with pytest.raises(TypeError, match="kzoo.models.Transformer"):
        export_ctranslate2(keras.Sequential([keras.layers.Dense(2)]), tokenizer, tmp_path / "x")
    small = SubwordTokenizer.train(["A dog runs.", "Ein Hund läuft."] * 20, vocabulary_size=300)
    with pytest.raises(ValueError, match="the tokenizer has 300 pieces but the model's source vocabulary is 800"):
        export_ctranslate2(trained, small, tmp_path / "x")
    with pytest.raises(ValueError, match="activation="):
        transformer_spec(Transformer(800, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, num_heads=2,
                                     intermediate_dim=8, share_embeddings=True, activation="tanh"), tokenizer)
    with pytest.raises(ValueError, match="beam_size=0"):
        ctranslate2_ids(None, tokenizer, ["A dog."], beam_size=0)
    assert not (tmp_path / "x").exists()
    assert ctranslate2_ids(None, tokenizer, []) == [] and translate_ctranslate2(None, tokenizer, []) == []

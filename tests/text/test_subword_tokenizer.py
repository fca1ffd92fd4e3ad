import os
import stat
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import multi30k
from kzoo.text import END, PAD, START, SubwordTokenizer, translation_batches


@pytest.fixture(scope="module")
def corpus():
    english, german = multi30k("train")
    return english[:3000], german[:3000]


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return SubwordTokenizer.train(corpus[0] + corpus[1], vocabulary_size=2000)


def test_round_trip_restores_german_text(tokenizer, corpus):
    # SentencePiece's default normalisation (NFKC, runs of spaces collapsed) is the only change.
    sentences = corpus[1][:200] + ["Größe über Ärger — «Zitat»!", "Straße, Fuß; Öl? Ja: 3,5 €.", "日本語 😀 ĳ", ""]
    ids = tokenizer.tokenize(tf.constant(sentences))
    assert ids.dtype == tf.int32
    restored = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert restored == [unicodedata.normalize("NFKC", " ".join(s.split())) for s in sentences]
    assert restored[-4] == "Größe über Ärger — «Zitat»!"


def test_reserved_ids_and_learning_is_deterministic(tokenizer, corpus):
    assert tokenizer.vocabulary_size == 2000
    again = SubwordTokenizer.train(corpus[0] + corpus[1], vocabulary_size=2000)
    assert again.model_proto == tokenizer.model_proto
    ids = tokenizer.tokenize(tf.constant(corpus[0][:50])).flat_values.numpy()
    assert ids.min() > END  # 0-3 are padding, start, end, unknown: never produced for text


def test_detokenize_reads_up_to_the_end_token_and_skips_padding(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["Ein Hund läuft."])).to_tensor().numpy()[0].tolist()
    decoder_output = tf.constant([[START] + ids + [END] + ids + [PAD, PAD]])
    assert tokenizer.detokenize(decoder_output).numpy()[0].decode() == "Ein Hund läuft."


def test_save_and_load(tmp_path, tokenizer):
    path = tmp_path / "sub" / "tokenizer.model"
    tokenizer.save(path)
    assert [p.name for p in path.parent.iterdir()] == ["tokenizer.model"]
    assert SubwordTokenizer.load(path).model_proto == tokenizer.model_proto
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SubwordTokenizer.load(tmp_path / "missing.model")


def test_batches_are_bucketed_teacher_forced_and_within_budget(tokenizer, corpus):
    batches = list(translation_batches(tokenizer, *corpus, max_tokens=1024, max_length=40, seed=1))
    pairs = 0
    for features, labels in batches:
        encoder, decoder = features["encoder_token_ids"].numpy(), features["decoder_token_ids"].numpy()
        labels = labels.numpy()
        assert encoder.shape[0] * max(encoder.shape[1], decoder.shape[1]) <= 1024 + 40
        np.testing.assert_array_equal(decoder[:, 0], START)
        # Labels are the decoder inputs shifted left, ending with the end token.
        np.testing.assert_array_equal(decoder[:, 1:][labels[:, :-1] != END], labels[:, :-1][labels[:, :-1] != END])
        assert np.all((labels == END).sum(1) == 1)
        assert np.all(encoder.max(1) > 0)
        pairs += len(labels)
    assert pairs == len(corpus[0])
    real = sum(int((labels.numpy() > 0).sum()) for _, labels in batches)
    total = sum(labels.numpy().size for _, labels in batches)
    assert real / total > 0.75  # bucketing keeps padding low


def test_save_writes_a_file_anyone_may_read_and_leaves_nothing_on_failure(tokenizer, tmp_path, monkeypatch):
    old_umask = os.umask(0o022)
    try:
        tokenizer.save(tmp_path / "tokenizer.model")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "tokenizer.model").stat().st_mode) == 0o644
    assert SubwordTokenizer.load(tmp_path / "tokenizer.model").model_proto == tokenizer.model_proto

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        tokenizer.save(tmp_path / "other.model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.model"]

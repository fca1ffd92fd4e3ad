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


def test_subword_dropout_resegments_every_pass_and_keeps_the_text(tokenizer, corpus):
    def normalized(text):  # what a round trip gives back (see test_round_trip_restores_german_text)
        return unicodedata.normalize("NFKC", " ".join(text.split()))

    sources, targets = [normalized(s) for s in corpus[0][:300]], [normalized(t) for t in corpus[1][:300]]
    plain = {"encoder": tokenizer.tokenize(tf.constant(sources)), "decoder": tokenizer.tokenize(tf.constant(targets))}
    plain_pieces = int(plain["encoder"].row_lengths().numpy().sum() + plain["decoder"].row_lengths().numpy().sum())
    data = translation_batches(tokenizer, sources, targets, max_tokens=1024, max_length=200, shuffle=False,
                               subword_dropout=0.3)
    passes = []
    for _ in range(2):
        rows = {}
        pieces = 0
        for features, labels in data:
            encoder, decoder, labels = (x.numpy() for x in (features["encoder_token_ids"],
                                                             features["decoder_token_ids"], labels))
            np.testing.assert_array_equal(decoder[:, 0], START)
            assert np.all((labels == END).sum(1) == 1) and np.all((encoder == END).sum(1) == 1)
            for source_row, decoder_row in zip(encoder, decoder):
                source_ids = source_row[: list(source_row).index(END)].tolist()
                target_ids = decoder_row[1:][decoder_row[1:] != PAD].tolist()
                text = tokenizer.detokenize(tf.constant([source_ids])).numpy()[0].decode()
                rows[text] = (source_ids, target_ids)
                pieces += len(source_ids) + len(target_ids)
        # Every pair is there once, and its pieces still spell its sentences.
        assert sorted(rows) == sorted(sources)
        for text, (_, target_ids) in rows.items():
            expected = targets[sources.index(text)]
            assert tokenizer.detokenize(tf.constant([target_ids])).numpy()[0].decode() == expected
        assert pieces > 1.3 * plain_pieces  # skipped merges leave more, shorter pieces
        passes.append(rows)
    assert passes[0] != passes[1]  # segmented afresh on every pass over the data


def test_subword_dropout_outside_0_1_is_refused(tokenizer, corpus):
    for dropout in (1.0, -0.1):
        with pytest.raises(ValueError, match=f"dropout={dropout}.*strictly between 0 and 1"):
            translation_batches(tokenizer, corpus[0][:5], corpus[1][:5], subword_dropout=dropout)

"""The exported translator's worst request is bounded inside the graph (#19 item 3): too many sentences are refused
with InvalidArgument naming the limit; a pathological sentence costs its own length, not its neighbours'; invalid
UTF-8 is replaced by U+FFFD, never silently dropped. Cost is measured as work done (decoder positions), not time."""

import pytest
import tensorflow as tf

from kzoo.data import multi30k
from kzoo.decoding import sub_batch_sizes
from kzoo.export import export_translator
from kzoo.translator import CHARACTERS_PER_TOKEN, Translator
from tests.tiny_translator import tiny_translator

BAD_UTF8 = b"A dog \xed\xa0\x80 runs on the beach."
REPLACED = "A dog \ufffd\ufffd\ufffd runs on the beach.".encode()  # one U+FFFD per invalid byte
PATHOLOGICAL = [("the " * 1000).encode(), b"x" * 100_000]


@pytest.fixture(scope="module")
def translator():
    return tiny_translator(3, method="beam", beam_size=2, max_source_length=64, max_sentences=12)


@pytest.fixture(scope="module")
def served(translator, tmp_path_factory):
    path = export_translator(translator, tmp_path_factory.mktemp("bounds") / "translator")
    return tf.saved_model.load(str(path)).signatures["serving_default"]


@pytest.fixture(scope="module")
def with_work(translator):
    return tf.function(lambda texts: translator.translate_tensor(texts, return_work=True),
                       input_signature=[tf.TensorSpec([None], tf.string)])


@pytest.fixture(scope="module")
def neighbours():
    english, _ = multi30k("val")
    return [s.encode() for s in english if len(s.split()) <= 8][:6]


def test_too_many_sentences_are_refused_naming_the_limit(served):
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_sentences=12"):
        served(text=tf.constant([b"A dog."] * 13))
    assert served(text=tf.constant([b""] * 12))["translation"].shape == [12]


def test_the_default_limit_refuses_a_2000_sentence_request_before_decoding(translator):
    default = Translator(translator.model, translator.tokenizer, method="greedy")
    assert default.max_sentences == 512
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_sentences=512"):
        default.translate_tensor(tf.constant([b"A dog runs on the beach."] * 2000))


def test_invalid_utf8_is_replaced_not_dropped(translator, served):
    assert translator.source_ids([BAD_UTF8]).numpy().tolist() != translator.tokenizer.tokenize([b""]).numpy().tolist()
    replaced = tf.strings.unicode_transcode([BAD_UTF8], "UTF-8", "UTF-8", errors="replace")
    assert replaced.numpy()[0] == REPLACED
    out = served(text=tf.constant([BAD_UTF8, REPLACED]))["translation"].numpy()
    assert out[0] == out[1]
    out[0].decode("utf-8")  # translations are valid UTF-8


def test_a_pathological_sentence_costs_its_own_length_not_its_neighbours(with_work, neighbours, translator):
    alone, alone_work = with_work(tf.constant(neighbours))
    long_alone, long_work = with_work(tf.constant(PATHOLOGICAL))
    mixed, mixed_work = with_work(tf.constant(neighbours[:3] + PATHOLOGICAL + neighbours[3:]))
    alone, long_alone = alone.numpy().tolist(), long_alone.numpy().tolist()
    assert mixed.numpy().tolist() == alone[:3] + long_alone + alone[3:]
    assert int(mixed_work) == int(alone_work) + int(long_work)  # the neighbours do exactly the work they do alone
    limit = int(1.5 * translator.max_source_length) + 10  # a cut sentence's output limit: 106 tokens
    assert int(long_work) <= 2 * limit
    own_limits = 1.5 * tf.reduce_sum(tf.cast(translator.source_ids(neighbours) > 0, tf.float32), axis=1) + 10
    assert int(alone_work) <= len(neighbours) * int(tf.reduce_max(own_limits)) < len(neighbours) * limit / 2


def test_overlong_input_is_cut_before_tokenizing(translator):
    cut = tf.strings.substr(PATHOLOGICAL[1], 0, CHARACTERS_PER_TOKEN * translator.max_source_length)
    assert translator.source_ids([PATHOLOGICAL[1]]).numpy().tolist() == translator.source_ids([cut]).numpy().tolist()
    assert translator.source_ids(PATHOLOGICAL).shape == (2, translator.max_source_length)


def test_sub_batches_bound_the_positions_alive_at_once():
    limits = tf.constant([12] * 10 + [30] * 10 + [106] * 3 + [400])
    sizes = sub_batch_sizes(limits, max_positions=128).numpy().tolist()
    assert sizes == [10, 4, 4, 2, 1, 1, 1, 1]  # 10 x 12; 4 x 30 (30 > 2 x 12); one 106 (128 // 106); 400 alone
    assert sum(sizes) == 24

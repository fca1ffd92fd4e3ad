"""A Translator that decodes a request in several independent lanes translates exactly as one that decodes one
sub-batch after another, and its graph holds one decoding loop per lane."""

import pytest
import tensorflow as tf

from kzoo.data import multi30k
from tests.tiny_translator import tiny_translator


@pytest.fixture(scope="module")
def sentences():
    english, _ = multi30k("val")
    return english[:36:3]  # 12 sentences of 8 to 30 words


@pytest.mark.parametrize("options", [{"beam_size": 3}, {"method": "greedy"}, {"beam_size": 3, "jit_max_sentences": 2}])
def test_lanes_give_the_one_lane_translations(sentences, options):
    one = tiny_translator(5, max_source_length=24, **options)
    expected = one.translate(sentences, batch_size=12)
    assert len(set(expected)) >= 4  # the untrained model's noise differs from sentence to sentence: the test bites
    three = tiny_translator(5, max_source_length=24, lanes=3, **options)
    assert three.settings() == {**one.settings(), "lanes": 3}  # what save and export record
    # 12 at once: every lane busy; 2 at a time: one lane with no sentence at all
    for batch_size in (12, 2):
        assert three.translate(sentences, batch_size=batch_size) == expected, batch_size


def while_loops(translator):
    graph = translator._compiled.get_concrete_function().graph
    return sum(node.op in ("While", "StatelessWhile") for node in graph.as_graph_def().node)


def test_each_lane_is_its_own_loop():
    one, three = tiny_translator(5, method="greedy"), tiny_translator(5, method="greedy", lanes=3)
    assert while_loops(three) == 3 * while_loops(one)  # each lane: its sub-batch cutting and its decoding loop
    assert while_loops(one) == 2


@pytest.mark.parametrize("value", [0, -2, 1.5])
def test_lanes_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match=f"lanes={value!r} must be a positive integer"):
        tiny_translator(5, lanes=value)


def test_decode_in_sub_batches_refuses_no_lanes():
    from kzoo.decoding import decode_in_sub_batches

    with pytest.raises(ValueError, match="lanes=0 must be a positive integer"):
        decode_in_sub_batches(lambda ids, limits: (ids, 1), tf.ones([2, 3], tf.int32), tf.constant([4, 5]), 100,
                              lanes=0)

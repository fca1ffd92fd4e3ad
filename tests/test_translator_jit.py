"""A Translator whose small sub-batches decode through the XLA-compiled beam search translates exactly as one that
decodes every sub-batch dynamically."""

import pytest

from kzoo.data import multi30k
from tests.tiny_translator import tiny_translator


@pytest.fixture(scope="module")
def sentences():
    english, _ = multi30k("val")
    return english[:36:3]  # 12 sentences of 8 to 30 words


def test_compiled_small_sub_batches_give_the_dynamic_translations(sentences):
    dynamic = tiny_translator(5, beam_size=3, max_source_length=24)
    compiled = tiny_translator(5, beam_size=3, max_source_length=24, jit_max_sentences=4)
    assert compiled.settings() == {**dynamic.settings(), "jit_max_sentences": 4}  # what save and export record
    # One at a time: every sub-batch compiled; all 12 at once: sub-batches of more than 4 decode dynamically.
    for batch_size in (1, 12):
        assert compiled.translate(sentences, batch_size=batch_size) == dynamic.translate(sentences, batch_size=12)
    assert len(set(dynamic.translate(sentences))) >= 6  # the untrained model's noise differs: the comparison bites


@pytest.mark.parametrize("value", [3, -1, 2.0])
def test_jit_max_sentences_must_be_a_power_of_two_or_zero(value):
    with pytest.raises(ValueError, match=f"jit_max_sentences={value!r} must be 0"):
        tiny_translator(5, jit_max_sentences=value)

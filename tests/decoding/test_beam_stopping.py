"""Beam search stops a sentence once its best finished hypothesis beats what any alive one can still reach: the same
translations as waiting for every one of the beam's finished hypotheses to beat it (tensor2tensor's rule), sooner.
With `early_stopping`, once beam-size hypotheses have ended (CTranslate2's rule): sooner still, not exact."""

import importlib

import numpy as np
import pytest
import tensorflow as tf

from kzoo.data import multi30k, shipped_model
from kzoo.decoding import beam_search
from kzoo.decoding.beams import extend_beams, initial_beams, length_penalty_of
from kzoo.layers.masks import MASKED_LOGIT
from kzoo.text import END
from kzoo.translator import Translator


def test_a_sentence_settles_on_its_first_finished_hypothesis_when_no_alive_one_can_beat_it():
    alive_seq, alive_log_probs, finished_seq, finished_scores = initial_beams(1, 2, width=4)
    logits = tf.constant([[0.0, 0.0, 8.0, 1.0, 1.0]] * 2)  # END (2) almost certain; the rest far behind
    beams = extend_beams(0, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, tf.constant([4]),
                         beam_size=2, length_penalty=0.6)
    assert beams.finished_seq.numpy()[0, 0, 0] == END and beams.finished_scores.numpy()[0, 1] == MASKED_LOGIT
    assert beams.settled.numpy().tolist() == [True]  # one finished hypothesis of two is enough


def strict_extend_beams(i, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, limits, beam_size,
                        length_penalty, early_stopping=False):
    """extend_beams with tensor2tensor's stopping rule: settled once the worst of the beam's finished hypotheses
    beats the best alive one's bound."""
    beams = extend_beams(i, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, limits, beam_size,
                         length_penalty)
    bound = beams.alive_log_probs[:, 0] / length_penalty_of(limits, length_penalty)
    return beams._replace(settled=(beams.finished_scores[:, -1] > bound) | (i + 1 >= limits))


def test_stopping_early_gives_the_translations_of_the_strict_rule_in_fewer_steps(monkeypatch):
    # Version 8's weights (beam 4, alpha 0.6, as searched here), on which these 24 sentences settle before the strict
    # rule would end them; on version 9's both rules take the same 37 steps for them (same translations).
    translator = Translator.load(shipped_model("transformer_multi30k_en_de") / "8")
    english, _ = multi30k("val")
    ids = translator.source_ids(tf.constant(english[:24]))
    limits = translator.output_limits(tf.reduce_sum(tf.cast(ids > 0, tf.int32), axis=1))

    def search():
        return tf.function(lambda ids, limits: beam_search(translator.model, ids, limits, 4, 0.6,
                                                           return_steps=True))(ids, limits)

    early, early_steps = search()
    module = importlib.import_module("kzoo.decoding.beam_search")  # the package re-exports the function by its name
    monkeypatch.setattr(module, "extend_beams", strict_extend_beams)
    strict, strict_steps = search()
    np.testing.assert_array_equal(early.numpy(), strict.numpy())
    assert int(early_steps) < int(strict_steps)


def test_early_stopping_settles_a_sentence_once_beam_size_hypotheses_have_ended():
    # Step 1 of a beam of 2 for two sentences, each alive hypothesis ending (token 2) or going on (token 3). With a
    # limit of 50 and alpha 1.0 an alive hypothesis could still reach log p / lp(50), so the exact rule settles
    # neither. Sentence 0: both ends rank among the 2 best candidates, so early stopping settles it. Sentence 1: its
    # second hypothesis's end ranks 4th of 4, below the beam: the exact rule keeps it, early stopping drops it (as
    # CTranslate2 does), which leaves one finished hypothesis, not enough to settle.
    alive_seq = tf.constant([[[5, 0, 0, 0], [6, 0, 0, 0]]] * 2)
    alive_log_probs = tf.constant([[-0.1, -0.2]] * 2)
    _, _, finished_seq, finished_scores = initial_beams(2, 2, width=4)
    logits = tf.constant([[0.0, 0.0, 9.0, 8.0, 0.0], [0.0, 0.0, 9.0, 8.0, 0.0],
                          [0.0, 0.0, 9.0, 8.0, 0.0], [0.0, 0.0, 7.0, 9.0, 0.0]])
    args = (1, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, tf.constant([50, 50]), 2, 1.0)
    exact, early = extend_beams(*args), extend_beams(*args, early_stopping=True)
    for field in ("alive_seq", "alive_log_probs", "tokens", "origin"):
        np.testing.assert_array_equal(getattr(early, field), getattr(exact, field))  # the same hypotheses go on
    assert exact.finished_seq.numpy()[0, :, :2].tolist() == early.finished_seq.numpy()[0, :, :2].tolist() == [
        [5, END], [6, END]]
    assert exact.finished_seq.numpy()[1, :, :2].tolist() == [[5, END], [6, END]]
    assert early.finished_seq.numpy()[1, 0, :2].tolist() == [5, END] and early.finished_scores[1, 1] == MASKED_LOGIT
    assert exact.settled.numpy().tolist() == [False, False] and early.settled.numpy().tolist() == [True, False]


def test_early_stopping_on_the_shipped_weights_takes_fewer_steps_and_compiles_to_the_same_ids():
    translator = Translator.load(shipped_model("transformer_multi30k_en_de") / "10")
    english, _ = multi30k("val")
    ids = translator.source_ids(tf.constant(english[:16]))
    limits = translator.output_limits(tf.reduce_sum(tf.cast(ids > 0, tf.int32), axis=1))

    def search(early_stopping):
        return tf.function(lambda ids, limits: beam_search(translator.model, ids, limits, 4, 0.8, return_steps=True,
                                                           early_stopping=early_stopping))(ids, limits)

    (exact, exact_steps), (early, early_steps) = search(False), search(True)
    np.testing.assert_array_equal(early.numpy(), exact.numpy())  # these 16 keep their translations (not all do)...
    assert int(early_steps) < int(exact_steps)  # ...in fewer steps (28 against 37)
    decode = Translator(translator.model, translator.tokenizer, beam_size=4, length_penalty=0.8,
                        early_stopping=True, jit_max_sentences=16)._jit_beam_search
    compiled, compiled_steps = decode(ids, limits)
    np.testing.assert_array_equal(compiled.numpy(), early.numpy())


def test_early_stopping_must_be_a_bool():
    with pytest.raises(ValueError, match="early_stopping='yes' must be True or False"):
        Translator(None, None, early_stopping="yes")

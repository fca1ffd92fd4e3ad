"""Beam search stops a sentence once its best finished hypothesis beats what any alive one can still reach: the same
translations as waiting for every one of the beam's finished hypotheses to beat it (tensor2tensor's rule), sooner."""

import importlib

import numpy as np
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
                        length_penalty):
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

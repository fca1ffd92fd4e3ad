"""Beam search's bookkeeping, one step of it, shared by the dynamic search (`beam_search`) and the fixed-shape one
that XLA compiles (`fixed_shape_beam_search`): only what they do with a settled sentence differs."""

import collections

import tensorflow as tf

from kzoo.decoding.length_limit import force_end
from kzoo.decoding.top_k import top_k
from kzoo.layers.masks import MASKED_LOGIT
from kzoo.text import END


class Beams(collections.namedtuple("Beams", ["tokens", "origin", "alive_seq", "alive_log_probs", "finished_seq",
                                             "finished_scores", "settled"])):
    """The state of n sentences' beams after one step of `extend_beams`.

    tokens (n, beam): each alive hypothesis's newest token; origin (n, beam): the hypothesis (0..beam-1) of the
    previous step it extends, by which the decoder cache's rows are reordered; alive_seq (n, beam, width) and
    alive_log_probs (n, beam); finished_seq (n, beam, width) and finished_scores (n, beam), the best first, scored
    with the length penalty; settled (n,): whether the sentence's best finished hypothesis is final.

    Example:
    ```python
    from kzoo.decoding.beams import Beams

    beams = Beams(*[None] * 7)._replace(settled=tf.constant([True, False]))
    assert beams.settled.numpy().tolist() == [True, False] and beams._fields[0] == "tokens"
    ```
    """


def length_penalty_of(length, alpha):
    """GNMT's length penalty lp(n) = ((5 + n) / 6)^α (Wu et al. 2016).

    Example:
    ```python
    from kzoo.decoding.beams import length_penalty_of

    assert float(length_penalty_of(1, 0.6)) == 1.0 and abs(float(length_penalty_of(7, 1.0)) - 2.0) < 1e-6
    ```
    """
    return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def initial_beams(batch, beam_size, width):
    """(alive_seq, alive_log_probs, finished_seq, finished_scores) before the first step: every hypothesis empty,
    only the first alive (so the first step's extensions are not beam_size copies of one), nothing finished.

    Example:
    ```python
    from kzoo.decoding.beams import initial_beams
    from kzoo.layers.masks import MASKED_LOGIT

    alive_seq, alive_log_probs, finished_seq, finished_scores = initial_beams(2, 3, width=5)
    assert alive_seq.shape == (2, 3, 5) and alive_log_probs.numpy()[0].tolist() == [0.0, MASKED_LOGIT, MASKED_LOGIT]
    ```
    """
    empty = tf.zeros([batch, beam_size, width], tf.int32)
    first_beam_only = tf.concat([tf.zeros([batch, 1]), tf.fill([batch, beam_size - 1], MASKED_LOGIT)], axis=1)
    return empty, first_beam_only, empty, tf.fill([batch, beam_size], MASKED_LOGIT)


def extend_beams(i, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, limits, beam_size,
                 length_penalty, early_stopping=False):
    """Step `i` of beam search for n sentences, from the decoder's logits (n·beam, V) for their alive hypotheses.

    Every alive hypothesis is extended by every token and the 2·beam best extensions are kept. Those that end with
    the end token join the finished ones, scored by log p / lp(i + 1); the others stay alive, at most beam of them.
    A sentence at its limit (`limits`, (n,)) can only end (`force_end`). Log-probabilities only fall as a
    hypothesis grows and the penalty is largest at the limit, so an alive hypothesis can at best reach
    alive_log_probs / lp(limit): a sentence whose best finished hypothesis beats that, or that reached its limit,
    is settled. Its best finished hypothesis, the one beam search returns, is then final: no later extension can
    beat it. (Waiting until every one of the beam's finished hypotheses beats that bound, as tensor2tensor does,
    returns the same best hypothesis, some steps later.)

    With `early_stopping`, a sentence also settles once `beam_size` hypotheses have finished, whatever its alive
    ones could still reach: CTranslate2's rule, and Hugging Face's `early_stopping=True`. As there, only an end among
    a step's beam best candidates finishes a hypothesis (an end ranked below them is dropped; counted, such ends
    would fill the finished set with short, unlikely hypotheses). It is not exact (a longer alive hypothesis might
    have scored better under the length penalty) and can be cheaper: with a length penalty the exact bound lets a
    sentence run on after its best translation has ended.

    Returns:
        `Beams`.

    Example:
    ```python
    from kzoo.decoding.beams import extend_beams, initial_beams
    from kzoo.text import END

    alive_seq, alive_log_probs, finished_seq, finished_scores = initial_beams(1, 2, width=3)
    logits = tf.constant([[0.0, 0.0, 5.0, 1.0]] * 2)  # both hypotheses favour token 2 (END)
    beams = extend_beams(0, logits, alive_log_probs, alive_seq, finished_seq, finished_scores, tf.constant([3]),
                         beam_size=2, length_penalty=0.6)
    assert beams.finished_seq.numpy()[0, 0].tolist() == [END, 0, 0] and beams.tokens.numpy()[0, 0] == 3
    ```
    """
    n, width = tf.shape(alive_seq)[0], tf.shape(alive_seq)[2]
    vocabulary = logits.shape[-1] or tf.shape(logits)[-1]  # static where known, so `top_k` can chunk the rows
    logits = force_end(tf.cast(logits, tf.float32), i, tf.repeat(limits, beam_size))
    log_probs = tf.reshape(tf.nn.log_softmax(logits), [n, beam_size, vocabulary]) + alive_log_probs[:, :, None]
    scores, flat_indices = top_k(tf.reshape(log_probs, [n, beam_size * vocabulary]), 2 * beam_size)
    origin, tokens = flat_indices // vocabulary, flat_indices % vocabulary  # (n, 2·beam)
    candidates = _gather(alive_seq, origin) + tokens[:, :, None] * tf.one_hot(i, width, dtype=tf.int32)
    ended = tf.equal(tokens, END)  # column i of every candidate was still 0
    finishing = ended & (tf.range(2 * beam_size) < beam_size) if early_stopping else ended

    alive_log_probs, keep = tf.math.top_k(tf.where(ended, MASKED_LOGIT, scores), beam_size)
    pooled_scores = tf.concat([finished_scores, tf.where(
        finishing, scores / length_penalty_of(i + 1, length_penalty), MASKED_LOGIT)], axis=1)
    finished_scores, top = tf.math.top_k(pooled_scores, beam_size)
    finished_seq = _gather(tf.concat([finished_seq, candidates], axis=1), top)
    settled = (finished_scores[:, 0] > alive_log_probs[:, 0] / length_penalty_of(limits, length_penalty)) | (
        i + 1 >= limits)
    if early_stopping:  # the pool's last entry is a real hypothesis once beam_size have finished
        settled |= finished_scores[:, beam_size - 1] > MASKED_LOGIT
    return Beams(_gather(tokens, keep), _gather(origin, keep), _gather(candidates, keep), alive_log_probs,
                 finished_seq, finished_scores, settled)


def _gather(values, indices):  # values (n, k, ...), indices (n, j) -> (n, j, ...)
    return tf.gather(values, indices, batch_dims=1)

"""Per-sentence output limits: a sentence that reaches its limit is made to end there."""

import tensorflow as tf

from kzoo.layers.masks import MASKED_LOGIT
from kzoo.text import END


def row_limits(max_length, batch):
    """`max_length` (a scalar, or one limit per sentence) as an int32 vector (batch,), and the largest limit."""
    limits = tf.broadcast_to(tf.cast(max_length, tf.int32), [batch])
    return limits, tf.reduce_max(tf.concat([limits, [1]], axis=0))


def force_end(logits, step, limits):
    """Logits (batch, vocabulary) where every sentence whose limit is step + 1 can only produce the end token.

    So a sentence decoded alone and the same sentence decoded in a batch of longer ones stop at the same length.
    """
    at_limit = tf.greater_equal(step + 1, limits)[:, None]
    only_end = tf.where(tf.equal(tf.range(tf.shape(logits)[-1]), END), 0.0, MASKED_LOGIT)[None, :]
    return tf.where(at_limit, tf.cast(only_end, logits.dtype), logits)

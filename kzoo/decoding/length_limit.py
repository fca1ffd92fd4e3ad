"""Per-sentence output limits: a sentence that reaches its limit is made to end there."""

import tensorflow as tf

from kzoo.layers.masks import MASKED_LOGIT
from kzoo.text import END


def row_limits(max_length, batch):
    """`max_length` (a scalar, or one limit per sentence) as an int32 vector (batch,), and the largest limit.

    Example:
    ```python
    from kzoo.decoding.length_limit import row_limits

    limits, longest = row_limits(5, 3)
    assert limits.numpy().tolist() == [5, 5, 5] and int(longest) == 5
    ```"""
    limits = tf.broadcast_to(tf.cast(max_length, tf.int32), [batch])
    return limits, tf.reduce_max(tf.concat([limits, [1]], axis=0))


def force_end(logits, step, limits):
    """Logits (batch, vocabulary) where every sentence whose limit is step + 1 can only produce the end token.

    So a sentence decoded alone and the same sentence decoded in a batch of longer ones stop at the same length.

    Example:
    ```python
    from kzoo.decoding.length_limit import force_end
    from kzoo.text import END

    logits = force_end(tf.zeros([2, 6]), step=2, limits=tf.constant([3, 9]))  # sentence 0 is at its limit
    assert tf.argmax(logits, axis=-1).numpy().tolist()[0] == END and logits.numpy()[1].tolist() == [0.0] * 6
    assert force_end(tf.ones([2, 6]), step=1, limits=tf.constant([3, 9])).numpy().tolist() == [[1.0] * 6] * 2
    ```
    """
    at_limit = tf.greater_equal(step + 1, limits)[:, None]

    def forced():
        only_end = tf.where(tf.equal(tf.range(tf.shape(logits)[-1]), END), 0.0, MASKED_LOGIT)[None, :]
        return tf.where(at_limit, tf.cast(only_end, logits.dtype), logits)

    # Most steps no sentence is at its limit: the select over every logit (a third of a millisecond at 128 × 8,000)
    # is then skipped.
    return tf.cond(tf.reduce_any(at_limit), forced, lambda: logits)

"""How the next token is picked from the decoder's distribution p: the most likely one, or a sample."""

import tensorflow as tf

from kzoo.layers.masks import MASKED_LOGIT


def greedy():
    """Pick argmax p: deterministic, the usual choice for translation.

    Example:
    ```python
    from kzoo.decoding import greedy

    assert greedy()(tf.constant([[0.1, 2.0, 0.3]]), 0).numpy().tolist() == [1]
    ```"""

    def pick(logits, step):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    return pick


def sampler(temperature=1.0, top_k=None, top_p=None, seed=0):
    """Sample the next token from p, as the lecture does, optionally reshaped.

    Args:
        temperature: float > 0. Divides the logits: below 1 sharpens p, above 1 flattens it.
        top_k: int, optional. Sample only among the k most likely tokens.
        top_p: float in (0, 1], optional. Sample only among the smallest set of tokens whose probability
            reaches p (nucleus sampling; the most likely token is always kept).
        seed: int. Seeds a stateless generator, so the same call gives the same tokens.

    Example:
    ```python
    from kzoo.decoding import sampler

    pick = sampler(temperature=0.7, top_k=2, seed=3)
    logits = tf.constant([[5.0, 4.0, -9.0, -9.0]] * 8)
    tokens = pick(logits, 0).numpy().tolist()
    assert set(tokens) <= {0, 1} and tokens == pick(logits, 0).numpy().tolist()  # top 2 only; reproducible
    ```
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive; use greedy() for argmax decoding.")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k={top_k} must be at least 1.")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p={top_p} must be in (0, 1].")

    def pick(logits, step):
        logits = tf.cast(logits, tf.float32) / temperature
        masked = tf.fill(tf.shape(logits), MASKED_LOGIT)
        if top_k is not None:
            kth = tf.math.top_k(logits, k=top_k).values[:, -1:]
            logits = tf.where(logits < kth, masked, logits)
        if top_p is not None:
            order = tf.argsort(logits, axis=-1, direction="DESCENDING")
            sorted_probs = tf.nn.softmax(tf.gather(logits, order, batch_dims=1))
            # Keep a token if the probability mass strictly before it is still below top_p.
            keep_sorted = tf.cumsum(sorted_probs, axis=-1, exclusive=True) < top_p
            keep = tf.scatter_nd(
                tf.stack([tf.repeat(tf.range(tf.shape(order)[0]), tf.shape(order)[1]), tf.reshape(order, [-1])], 1),
                tf.reshape(keep_sorted, [-1]),
                tf.shape(order),
            )
            logits = tf.where(keep, logits, masked)
        return tf.cast(
            tf.random.stateless_categorical(logits, 1, seed=tf.stack([seed, tf.cast(step, tf.int32)]))[:, 0], tf.int32
        )

    return pick

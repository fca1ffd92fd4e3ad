"""Beam search with a length penalty, over a cached Transformer decoder."""

import tensorflow as tf

from kzoo.decoding.length_limit import force_end, row_limits
from kzoo.decoding.loop_shapes import loop_shapes
from kzoo.layers.masks import MASKED_LOGIT
from kzoo.text import END, START


def beam_search(model, encoder_token_ids, max_length, beam_size=4, length_penalty=0.6, return_steps=False):
    """The `beam_size` most likely translations of each sentence, kept apart as alive and finished hypotheses.

    Each step extends every alive hypothesis by every token and keeps the 2·beam_size best extensions. Those that end
    with the end token join the finished set, scored by log p / lp(length) with the GNMT length penalty
    lp(n) = ((5 + n) / 6)^length_penalty (Wu et al. 2016), so short outputs are not favoured just for being short;
    the others stay alive, at most beam_size of them. A finished hypothesis stops growing. A sentence's hypotheses
    must end at its length limit; search stops when every sentence has reached it or no alive hypothesis can still
    beat its worst finished one. Encoder keys and values are
    computed once per sentence and shared by its hypotheses; the decoder self-attention cache follows them.

    Args:
        model: a `kzoo.models.Transformer`.
        encoder_token_ids: int tensor (batch, m), 0 for padding.
        max_length: int, or int tensor (batch,) of per-sentence limits: the most tokens to generate, the end token
            included.
        beam_size: int. Hypotheses kept per sentence. Defaults to 4.
        length_penalty: float. α of the length penalty; 0 scores by plain log-probability. Defaults to 0.6.

    Returns:
        int32 tensor (batch, the largest limit): the best hypothesis of each sentence, end token included, 0-padded.

    Example:
    ```python
    from kzoo.decoding import beam_search
    from kzoo.text import END

    model = kzoo.models.Transformer(40, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    ids = beam_search(model, tf.constant([[5, 6, 7, 2], [8, 2, 0, 0]]), tf.constant([6, 4]), beam_size=3)
    assert ids.shape == (2, 6) and END in ids.numpy()[1, :4].tolist()  # each sentence ends by its own limit
    ```
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1.")
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    batch = tf.shape(encoder_token_ids)[0]
    limits, max_length = row_limits(max_length, batch)
    vocabulary = model.target_vocabulary_size
    u, encoder_padding_mask = model.encode(encoder_token_ids)
    cache = model.initial_cache(u)  # encoder keys and values (batch, heads, m, dim): one per sentence, not per beam
    cache["self"] = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), cache["self"])

    def penalty(length):
        return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** length_penalty

    def gather(values, indices):  # values (n, k, ...), indices (n, j) -> (n, j, ...)
        return tf.gather(values, indices, batch_dims=1)

    def step(i, sentences, last_token, alive_seq, alive_log_probs, finished_seq, finished_scores, cache, mask, rows,
             best):
        # `sentences` (n,): the batch rows still searched; every other state has n rows, or n·beam (hypotheses).
        n, sentence_limits = tf.shape(sentences)[0], tf.gather(limits, sentences)
        # The previous step's reordering of the cache rows (n·beam, heads, i, dim) is applied here, once a step.
        cache = {"self": tf.nest.map_structure(lambda t: tf.gather(t, rows), cache["self"]), "cross": cache["cross"]}
        logits, cache = model.decode_step(last_token[:, None], i, cache, mask)
        logits = force_end(tf.cast(logits[:, 0], tf.float32), i, tf.repeat(sentence_limits, beam_size))
        log_probs = tf.nn.log_softmax(logits)  # (n·beam, V)
        log_probs = tf.reshape(log_probs, [n, beam_size, vocabulary]) + alive_log_probs[:, :, None]
        scores, flat_indices = tf.math.top_k(tf.reshape(log_probs, [n, beam_size * vocabulary]), 2 * beam_size)
        origin, tokens = flat_indices // vocabulary, flat_indices % vocabulary  # (n, 2·beam)
        column = tf.one_hot(i, tf.shape(alive_seq)[2], dtype=tf.int32)
        candidates = gather(alive_seq, origin) + tokens[:, :, None] * column  # column i was still 0
        ended = tf.equal(tokens, END)

        alive_log_probs, keep = tf.math.top_k(tf.where(ended, MASKED_LOGIT, scores), beam_size)
        alive_seq = gather(candidates, keep)
        rows = gather(origin, keep) + tf.range(n)[:, None] * beam_size  # (n, beam): the hypotheses' rows

        pooled_scores = tf.concat([finished_scores, tf.where(ended, scores / penalty(i + 1), MASKED_LOGIT)], axis=1)
        finished_scores, top = tf.math.top_k(pooled_scores, beam_size)
        finished_seq = gather(tf.concat([finished_seq, candidates], axis=1), top)
        last_token = gather(tokens, keep)  # (n, beam)

        # Log-probabilities only fall as a hypothesis grows and the penalty is largest at the limit, so an alive
        # hypothesis can at best reach alive_log_probs / penalty(limit): a sentence whose worst finished hypothesis
        # beats that, or that reached its limit, is settled. Its best hypothesis is final; it leaves the batch.
        settled = (finished_scores[:, -1] > alive_log_probs[:, 0] / penalty(sentence_limits)) | (
            i + 1 >= sentence_limits)
        best = tf.tensor_scatter_nd_update(best, tf.boolean_mask(sentences, settled)[:, None],
                                           tf.boolean_mask(finished_seq[:, 0], settled))
        left = tf.cast(tf.where(~settled)[:, 0], tf.int32)
        per_sentence = [tf.gather(t, left) for t in (sentences, last_token, alive_seq, alive_log_probs,
                                                     finished_seq, finished_scores, rows)]
        sentences, last_token, alive_seq, alive_log_probs, finished_seq, finished_scores, rows = per_sentence
        cross, mask = tf.cond(tf.reduce_any(settled),
                              lambda: tf.nest.map_structure(lambda t: tf.gather(t, left), (cache["cross"], mask)),
                              lambda: (cache["cross"], mask))
        cache = {"self": cache["self"], "cross": cross}
        return (i + 1, sentences, tf.reshape(last_token, [-1]), alive_seq, alive_log_probs, finished_seq,
                finished_scores, cache, mask, tf.reshape(rows, [-1]), best)

    empty = tf.zeros([batch, beam_size, max_length], tf.int32)
    first_beam_only = tf.concat([tf.zeros([batch, 1]), tf.fill([batch, beam_size - 1], MASKED_LOGIT)], axis=1)
    loop_vars = (
        tf.constant(0),
        tf.range(batch),
        tf.fill([batch * beam_size], START),
        empty,
        first_beam_only,
        empty,
        tf.fill([batch, beam_size], MASKED_LOGIT),
        cache,
        encoder_padding_mask,
        tf.range(batch * beam_size),
        tf.zeros([batch, max_length], tf.int32),
    )
    steps, *_, best = tf.while_loop(
        lambda i, sentences, *_: (i < max_length) & (tf.size(sentences) > 0), step, loop_vars,
        shape_invariants=loop_shapes(loop_vars, cache_position=7, rows_vary=True),
    )
    return (best, steps) if return_steps else best

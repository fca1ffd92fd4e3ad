"""Beam search with a length penalty, over a cached Transformer decoder."""

import tensorflow as tf

from kzoo.decoding.beams import extend_beams, initial_beams
from kzoo.decoding.length_limit import row_limits
from kzoo.decoding.loop_shapes import loop_shapes
from kzoo.text import START


def beam_search(model, encoder_token_ids, max_length, beam_size=4, length_penalty=0.6, return_steps=False,
                early_stopping=False):
    """The `beam_size` most likely translations of each sentence, kept apart as alive and finished hypotheses.

    Each step extends every alive hypothesis by every token and keeps the 2·beam_size best extensions. Those that end
    with the end token join the finished set, scored by log p / lp(length) with the GNMT length penalty
    lp(n) = ((5 + n) / 6)^length_penalty (Wu et al. 2016), so short outputs are not favoured just for being short;
    the others stay alive, at most beam_size of them. A finished hypothesis stops growing. A sentence's hypotheses
    must end at its length limit; a sentence is settled when it reaches it or no alive hypothesis can still beat its
    best finished one, which is returned (or, with `early_stopping`, once beam_size hypotheses have finished: see
    `kzoo.decoding.beams.extend_beams`), and search stops when every sentence is settled. Encoder keys and values are
    computed once per sentence and shared by its hypotheses; the decoder self-attention cache follows them.

    Args:
        model: a `kzoo.models.Transformer`.
        encoder_token_ids: int tensor (batch, m), 0 for padding.
        max_length: int, or int tensor (batch,) of per-sentence limits: the most tokens to generate, the end token
            included.
        beam_size: int. Hypotheses kept per sentence. Defaults to 4.
        length_penalty: float. α of the length penalty; 0 scores by plain log-probability. Defaults to 0.6.
        return_steps: bool. Also return the decoding steps taken. Defaults to False.
        early_stopping: bool. Settle a sentence once beam_size of its hypotheses have finished (CTranslate2's rule:
            fewer decoder positions, not exact) instead of when none alive can beat its best. Defaults to False.

    Returns:
        int32 tensor (batch, the largest limit): the best hypothesis of each sentence, end token included, 0-padded;
        with `return_steps`, (that, int32 steps).

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
    u, encoder_padding_mask = model.encode(encoder_token_ids)
    cache = model.initial_cache(u)  # encoder keys and values (batch, heads, m, dim): one per sentence, not per beam
    cache["self"] = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), cache["self"])

    def step(i, sentences, last_token, alive_seq, alive_log_probs, finished_seq, finished_scores, cache, mask, rows,
             best):
        # `sentences` (n,): the batch rows still searched; every other state has n rows, or n·beam (hypotheses).
        n, sentence_limits = tf.shape(sentences)[0], tf.gather(limits, sentences)
        # The previous step's reordering of the cache rows (n·beam, heads, i, dim) is applied here, once a step.
        cache = {**cache, "self": tf.nest.map_structure(lambda t: tf.gather(t, rows), cache["self"])}
        logits, cache = model.decode_step(last_token[:, None], i, cache, mask)
        beams = extend_beams(i, logits[:, 0], alive_log_probs, alive_seq, finished_seq, finished_scores,
                             sentence_limits, beam_size, length_penalty, early_stopping)
        last_token, alive_seq, alive_log_probs = beams.tokens, beams.alive_seq, beams.alive_log_probs
        finished_seq, finished_scores, settled = beams.finished_seq, beams.finished_scores, beams.settled
        rows = beams.origin + tf.range(n)[:, None] * beam_size  # (n, beam): the hypotheses' rows

        # A settled sentence's best hypothesis is final; it leaves the batch.
        best = tf.tensor_scatter_nd_update(best, tf.boolean_mask(sentences, settled)[:, None],
                                           tf.boolean_mask(finished_seq[:, 0], settled))
        left = tf.cast(tf.where(~settled)[:, 0], tf.int32)
        per_sentence = [tf.gather(t, left) for t in (sentences, last_token, alive_seq, alive_log_probs,
                                                     finished_seq, finished_scores, rows)]
        sentences, last_token, alive_seq, alive_log_probs, finished_seq, finished_scores, rows = per_sentence
        cross, mask = tf.cond(tf.reduce_any(settled),
                              lambda: tf.nest.map_structure(lambda t: tf.gather(t, left), (cache["cross"], mask)),
                              lambda: (cache["cross"], mask))
        cache = {**cache, "cross": cross}
        return (i + 1, sentences, tf.reshape(last_token, [-1]), alive_seq, alive_log_probs, finished_seq,
                finished_scores, cache, mask, tf.reshape(rows, [-1]), best)

    alive_seq, alive_log_probs, finished_seq, finished_scores = initial_beams(batch, beam_size, max_length)
    loop_vars = (
        tf.constant(0),
        tf.range(batch),
        tf.fill([batch * beam_size], START),
        alive_seq,
        alive_log_probs,
        finished_seq,
        finished_scores,
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

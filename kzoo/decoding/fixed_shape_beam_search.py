"""Beam search whose every tensor keeps its shape from step to step, so that XLA can compile it; and the bucketing
that lets a few compiled shapes serve requests of any size."""

import tensorflow as tf

from kzoo.decoding.beams import extend_beams, initial_beams
from kzoo.text import END, START

# The source lengths a compiled search pads to: powers of two from 16, so 128 tokens need 4 compiles (a compile takes
# seconds). Padding is nearly free: one sentence a step is bound by the decoder's matmuls, not by the positions it
# attends to (shipped translator, 25 val sentences one at a time: 33.9 ms a sentence with these buckets and with
# multiples of 8 alike).
SOURCE_BUCKETS = tuple(2**k for k in range(4, 17))


def fixed_shape_beam_search(model, encoder_token_ids, max_length, cache_length, beam_size=4, length_penalty=0.6,
                            early_stopping=False):
    """`beam_search`'s hypotheses with fixed shapes: what a `jit_compile=True` function needs.

    The decoder's self-attention cache holds `cache_length` positions from the start, written in place
    (`Transformer.initial_cache(u, max_length)`), and a settled sentence stays in the batch, its finished hypotheses
    frozen, until every sentence is settled; `beam_search` instead grows the cache and drops settled sentences,
    which is cheaper on large batches but gives XLA a new shape every step. The steps themselves are the same
    (`kzoo.decoding.beams.extend_beams`), so both give the same token ids.

    Args:
        model: a `kzoo.models.Transformer`.
        encoder_token_ids: int tensor (batch, m), 0 for padding.
        max_length: int tensor (batch,): each sentence's output limit, end token included.
        cache_length: int scalar: at least the largest limit. Under XLA it must be a compile-time constant (a
            Python int, or a scalar tensor argument of the compiled function: one compile per value).
        beam_size: int. Hypotheses kept per sentence. Defaults to 4.
        length_penalty: float. α of the length penalty. Defaults to 0.6.
        early_stopping: bool. `beam_search`'s rule for settling a sentence. Defaults to False.

    Returns:
        (int32 ids (batch, cache_length), 0-padded, end token included; int32 steps taken).

    Example:
    ```python
    from kzoo.decoding import beam_search
    from kzoo.decoding.fixed_shape_beam_search import fixed_shape_beam_search

    model = kzoo.models.Transformer(40, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    source, limits = tf.constant([[5, 6, 7, 2], [8, 2, 0, 0]]), tf.constant([6, 4])
    compiled = tf.function(fixed_shape_beam_search, jit_compile=True)
    ids, steps = compiled(model, source, limits, cache_length=8, beam_size=3)
    assert ids.numpy()[:, :6].tolist() == beam_search(model, source, limits, beam_size=3).numpy().tolist()
    ```
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1.")
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    limits = tf.convert_to_tensor(max_length, tf.int32)
    batch = tf.shape(encoder_token_ids)[0]
    u, encoder_padding_mask = model.encode(encoder_token_ids)
    cache = model.initial_cache(u, max_length=cache_length)  # encoder keys and values: one per sentence
    constant = {key: value for key, value in cache.items() if key != "self"}  # the same on every step
    self_cache = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), cache["self"])
    offsets = tf.range(batch)[:, None] * beam_size

    def step(i, last_token, alive_seq, alive_log_probs, finished_seq, finished_scores, self_cache, rows, done):
        self_cache = tf.nest.map_structure(lambda t: tf.gather(t, rows), self_cache)
        logits, new = model.decode_step(last_token[:, None], i, {**constant, "self": self_cache},
                                        encoder_padding_mask)
        beams = extend_beams(i, logits[:, 0], alive_log_probs, alive_seq, finished_seq, finished_scores, limits,
                             beam_size, length_penalty, early_stopping)
        # A settled sentence keeps the hypotheses it settled with; its alive ones run on unread.
        finished_seq = tf.where(done[:, None, None], finished_seq, beams.finished_seq)
        finished_scores = tf.where(done[:, None], finished_scores, beams.finished_scores)
        return (i + 1, tf.reshape(beams.tokens, [-1]), beams.alive_seq, beams.alive_log_probs, finished_seq,
                finished_scores, new["self"], tf.reshape(beams.origin + offsets, [-1]), done | beams.settled)

    alive_seq, alive_log_probs, finished_seq, finished_scores = initial_beams(batch, beam_size, cache_length)
    loop_vars = (tf.constant(0), tf.fill([batch * beam_size], START), alive_seq, alive_log_probs, finished_seq,
                 finished_scores, self_cache, tf.range(batch * beam_size), tf.zeros([batch], tf.bool))
    steps, *state = tf.while_loop(lambda i, *state: (i < cache_length) & ~tf.reduce_all(state[-1]), step, loop_vars)
    return state[3][:, 0], steps


def smallest_at_least(sizes, n):
    """The first of `sizes` (ascending Python ints) that is at least the scalar tensor `n`, or n itself beyond them.

    Example:
    ```python
    from kzoo.decoding.fixed_shape_beam_search import SOURCE_BUCKETS, smallest_at_least

    assert [int(smallest_at_least(SOURCE_BUCKETS, m)) for m in (1, 16, 17, 100)] == [16, 16, 32, 128]
    ```
    """
    sizes = tf.constant(sizes, tf.int32)
    n = tf.cast(n, tf.int32)
    return tf.reduce_min(tf.concat([tf.boolean_mask(sizes, sizes >= n), [tf.maximum(n, sizes[-1])]], axis=0))


def sentence_buckets(max_sentences):
    """The batch sizes a compiled search pads to: the powers of two up to `max_sentences` (itself one).

    Example:
    ```python
    from kzoo.decoding.fixed_shape_beam_search import sentence_buckets

    assert sentence_buckets(8) == (1, 2, 4, 8)
    ```
    """
    if max_sentences < 1 or max_sentences & (max_sentences - 1):
        raise ValueError(f"max_sentences={max_sentences} must be a power of two (the largest bucket of sentences).")
    return tuple(2**k for k in range(max_sentences.bit_length()))


def compiled_beam_search(model, beam_size, length_penalty, cache_length, max_sentences, early_stopping=False):
    """A decoder (encoder_token_ids (n, m), limits (n,)) -> (ids (n, largest limit), steps) for n <= `max_sentences`
    sentences that runs `fixed_shape_beam_search` compiled with XLA, on bucketed shapes: the sentences padded to a
    power of two (`sentence_buckets`; with one-token sentences that end at once), the source to one of
    `SOURCE_BUCKETS`, and a cache of `cache_length(padded m)` positions (a function of the padded source length that
    bounds every limit a source that long can get). So a few compiles (seconds each) serve every request:
    log2(max_sentences) + 1 sizes times the source buckets (4 up to 128 tokens). The ids equal `beam_search`'s
    (with the same `early_stopping`).

    Example:
    ```python
    from kzoo.decoding import beam_search
    from kzoo.decoding.fixed_shape_beam_search import compiled_beam_search

    model = kzoo.models.Transformer(40, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    decode = compiled_beam_search(model, 3, 0.6, cache_length=lambda m: m + 10, max_sentences=4)
    source, limits = tf.constant([[5, 6, 7, 2], [8, 2, 0, 0], [9, 9, 2, 0]]), tf.constant([6, 4, 5])
    ids, steps = decode(source, limits)  # padded to 4 sentences of 16 tokens, a cache of 26 positions
    assert ids.numpy().tolist() == beam_search(model, source, limits, beam_size=3).numpy().tolist()
    ```
    """
    sizes = sentence_buckets(max_sentences)

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None, None], tf.int32),
                                                    tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int32)])
    def compiled(encoder_token_ids, limits, length):
        return fixed_shape_beam_search(model, encoder_token_ids, limits, length, beam_size, length_penalty,
                                       early_stopping)

    def decode(encoder_token_ids, limits):
        encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
        limits = tf.convert_to_tensor(limits, tf.int32)
        n, m = tf.shape(encoder_token_ids)[0], tf.shape(encoder_token_ids)[1]
        tf.debugging.assert_less_equal(n, max_sentences, message="compiled_beam_search: too many sentences")
        padded_m = smallest_at_least(SOURCE_BUCKETS, m)
        extra = smallest_at_least(sizes, n) - n
        ends = tf.pad(tf.fill([extra, 1], END), [[0, 0], [0, padded_m - 1]])  # sentences of the end token alone
        source = tf.concat([tf.pad(encoder_token_ids, [[0, 0], [0, padded_m - m]]), ends], axis=0)
        ids, steps = compiled(source, tf.concat([limits, tf.ones([extra], tf.int32)], axis=0),
                              tf.cast(cache_length(padded_m), tf.int32))
        return ids[:n, : tf.reduce_max(limits)], steps

    return decode

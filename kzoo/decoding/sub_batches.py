"""Decode a batch as sub-batches of sentences of similar length, so that one long sentence costs its neighbours
nothing and the decoder state of a request is bounded."""

import tensorflow as tf

from kzoo.text import PAD

LIMIT_RATIO = 2  # a sub-batch holds sentences whose output limits are within this factor of its shortest one's


def sub_batch_sizes(limits, max_positions, max_ratio=LIMIT_RATIO):
    """How many sentences each sub-batch of `limits` (int (n,), sorted ascending) takes, as an int (k,) tensor.

    Sub-batches are cut greedily from the shortest: each takes the most next sentences such that (sentences) × (their
    largest limit) stays within `max_positions` and no limit exceeds `max_ratio` × the sub-batch's first; a sentence
    whose limit alone exceeds `max_positions` is a sub-batch of its own.

    Example:
    ```python
    from kzoo.decoding.sub_batches import sub_batch_sizes

    sizes = sub_batch_sizes(tf.constant([20, 22, 25, 30, 200]), max_positions=100)
    assert sizes.numpy().tolist() == [3, 1, 1]  # 3 × 25 <= 100, 4 × 30 > 100; 200 > 2 × 30
    ```
    """
    limits = tf.convert_to_tensor(limits, tf.int32)
    n = tf.shape(limits)[0]

    def cut(start, sizes):
        rest = limits[start:]
        fits = (tf.range(1, n - start + 1) * rest <= max_positions) & (rest <= max_ratio * rest[0])
        size = tf.maximum(1, tf.reduce_sum(tf.cast(fits, tf.int32)))  # fits is a prefix: rest only grows
        return start + size, sizes.write(sizes.size(), size)

    _, sizes = tf.while_loop(lambda start, sizes: start < n, cut,
                             (tf.constant(0), tf.TensorArray(tf.int32, size=0, dynamic_size=True)))
    return sizes.stack()


def decode_in_sub_batches(decode, encoder_token_ids, limits, max_positions, max_ratio=LIMIT_RATIO, lanes=1):
    """Run `decode` over sub-batches of sentences of similar output limit; the ids and the work it did.

    Sentences are sorted by limit and dealt round-robin into `lanes` independent lanes (so each lane gets sentences
    of every length); each lane is cut as `sub_batch_sizes` says and decodes its sub-batches one after another. Each
    sub-batch's source is trimmed to its own longest sentence and decoded up to its own largest limit, so a sentence's
    translation costs about its own length whatever else the batch holds, and at most `max_positions` decoder
    positions (times the beam) are alive at once, over all lanes. The lanes share no tensors, so TensorFlow's
    inter-op threads run them at the same time: with several cores and one intra-op thread, each core decodes a lane.

    Args:
        decode: a function (encoder_token_ids (b, m), limits (b,)) -> (ids (b, largest limit), steps taken), such
            as `beam_search` or `generate` with `return_steps=True`.
        encoder_token_ids: int tensor (batch, m), 0 for padding.
        limits: int tensor (batch,): each sentence's output limit.
        max_positions: int. Sentences × output limit alive at once, at most, over all lanes (each lane's sub-batches
            take at most `max_positions // lanes`; a longer sentence goes alone).
        max_ratio: int. The largest limit of a sub-batch is at most this times its smallest.
        lanes: int. Independent decoding lanes. Defaults to 1 (the sub-batches one after another).

    Returns:
        (int32 ids (batch, largest limit), int32 work): the ids in the input's order, 0-padded; the decoder
        positions computed, the sum over sub-batches of sentences × steps taken.

    Example:
    ```python
    from kzoo.decoding.sub_batches import decode_in_sub_batches

    def decode(ids, limits):  # a stand-in decoder: the limit itself, in every position of its row
        return tf.fill([tf.shape(ids)[0], tf.reduce_max(limits)], tf.reduce_max(limits)), tf.reduce_max(limits)

    ids, work = decode_in_sub_batches(decode, tf.ones([3, 4], tf.int32), tf.constant([9, 3, 4]), max_positions=8)
    assert ids.numpy()[:, 0].tolist() == [9, 4, 4] and int(work) == 9 + 2 * 4
    ids, work = decode_in_sub_batches(decode, tf.ones([3, 4], tf.int32), tf.constant([9, 3, 4]), max_positions=8,
                                      lanes=2)  # lane 0 takes the limits 3 and 9, lane 1 the 4
    assert ids.numpy()[:, 0].tolist() == [9, 3, 4] and int(work) == 3 + 9 + 4
    ```
    """
    if not isinstance(lanes, int) or lanes < 1:
        raise ValueError(f"lanes={lanes!r} must be a positive integer (1: one sub-batch after another).")
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    limits = tf.convert_to_tensor(limits, tf.int32)
    batch = tf.shape(limits)[0]
    width = tf.reduce_max(tf.concat([limits, [1]], axis=0))
    order = tf.argsort(limits, stable=True)
    source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(encoder_token_ids, PAD), tf.int32), axis=1)
    lane_positions = max(1, max_positions // lanes)

    def decode_lane(lane_order):  # rows of the batch, sorted by limit; one sub-batch after another
        sizes = sub_batch_sizes(tf.gather(limits, lane_order), lane_positions, max_ratio)

        def step(k, start, ids, work):
            rows = lane_order[start : start + sizes[k]]
            source = tf.gather(encoder_token_ids, rows)[:, : tf.reduce_max(tf.gather(source_lengths, rows))]
            chunk, steps = decode(source, tf.gather(limits, rows))
            chunk = tf.pad(chunk, [[0, 0], [0, width - tf.shape(chunk)[1]]])
            return (k + 1, start + sizes[k], tf.tensor_scatter_nd_update(ids, rows[:, None], chunk),
                    work + sizes[k] * steps)

        _, _, ids, work = tf.while_loop(lambda k, *_: k < tf.size(sizes), step,
                                        (tf.constant(0), tf.constant(0), tf.zeros([batch, width], tf.int32),
                                         tf.constant(0)))
        return ids, work

    results = [decode_lane(order[lane::lanes]) for lane in range(lanes)]  # each fills its own rows, zeros elsewhere
    return tf.add_n([ids for ids, _ in results]), tf.add_n([work for _, work in results])

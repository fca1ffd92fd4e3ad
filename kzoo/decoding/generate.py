"""Token-by-token decoding with a key/value cache: greedy or sampled."""

import tensorflow as tf

from kzoo.decoding.length_limit import force_end, row_limits
from kzoo.decoding.loop_shapes import loop_shapes
from kzoo.decoding.samplers import greedy
from kzoo.text import END, PAD, START


def generate(model, encoder_token_ids, max_length, pick=None, return_steps=False):
    """Decode a batch with a `Transformer`, one token per step, reusing a key/value cache.

    The encoder runs once; every decoder block's keys and values over the encoder output are computed once per
    sentence; each step feeds only the newest token and extends the self-attention cache. A sentence stops at its
    first end token (the rest of its row is padding); the loop stops when every sentence has.

    Args:
        model: a `kzoo.models.Transformer`.
        encoder_token_ids: int tensor (batch, m), 0 for padding.
        max_length: int, or int tensor (batch,) of per-sentence limits: the most tokens to generate, the end token
            included. A sentence that reaches its limit ends there.
        pick: a function (logits (batch, vocabulary), step) -> ids (batch,), from `kzoo.decoding.samplers`.
            Defaults to greedy.
        return_steps: bool. Also return the number of decoder steps taken (an int32 scalar). Defaults to False.

    Returns:
        int32 tensor (batch, the largest limit): generated ids, without the start token, padded with 0.

    Example:
    ```python
    from kzoo.decoding import generate

    model = kzoo.models.Transformer(40, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    ids, steps = generate(model, tf.constant([[5, 6, 7, 2]]), max_length=6, return_steps=True)
    assert ids.shape == (1, 6) and 1 <= int(steps) <= 6  # an untrained model's ids; it ends at the limit at latest
    ```
    """
    pick = pick or greedy()
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    batch = tf.shape(encoder_token_ids)[0]
    limits, max_length = row_limits(max_length, batch)
    u, encoder_padding_mask = model.encode(encoder_token_ids)
    cache = model.initial_cache(u)

    def step(i, token, finished, cache, output):
        logits, cache = model.decode_step(token[:, None], i, cache, encoder_padding_mask)
        token = tf.where(finished, PAD, pick(force_end(logits[:, 0], i, limits), i))
        return i + 1, token, finished | tf.equal(token, END), cache, output.write(i, token)

    loop_vars = (
        tf.constant(0),
        tf.fill([batch], START),
        tf.zeros([batch], tf.bool),
        cache,
        tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None]),
    )
    steps, _, _, _, output = tf.while_loop(
        lambda i, token, finished, cache, output: (i < max_length) & ~tf.reduce_all(finished),
        step,
        loop_vars,
        shape_invariants=loop_shapes(loop_vars, cache_position=3),
    )
    tokens = tf.transpose(output.stack())  # (batch, steps taken)
    tokens = tf.pad(tokens, [[0, 0], [0, max_length - tf.shape(tokens)[1]]])
    return (tokens, steps) if return_steps else tokens


def greedy_reference(model, encoder_token_ids, max_length):
    """Greedy decoding the slow, obvious way: rerun the whole decoder on the whole prefix for every token.

    No cache; used to check that `generate` is exact. Like `generate`, a sentence ends at `max_length` at the latest.

    Example:
    ```python
    from kzoo.decoding import generate, greedy_reference

    model = kzoo.models.Transformer(40, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16, num_heads=2,
                                    intermediate_dim=32)
    source = tf.constant([[5, 6, 7, 2]])
    assert greedy_reference(model, source, 5).numpy().tolist() == generate(model, source, 5).numpy().tolist()
    ```
    """
    encoder_token_ids = tf.convert_to_tensor(encoder_token_ids, tf.int32)
    batch = encoder_token_ids.shape[0]
    prefix = tf.fill([batch, 1], START)
    finished = tf.zeros([batch], tf.bool)
    limits = tf.fill([batch], max_length)
    for i in range(max_length):
        logits = model({"encoder_token_ids": encoder_token_ids, "decoder_token_ids": prefix}, training=False)
        logits = force_end(logits[:, -1], i, limits)
        token = tf.where(finished, PAD, tf.argmax(logits, axis=-1, output_type=tf.int32))
        finished |= tf.equal(token, END)
        prefix = tf.concat([prefix, token[:, None]], axis=1)
    return prefix[:, 1:]

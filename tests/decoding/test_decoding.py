import keras
import numpy as np
import pytest
import tensorflow as tf

from kzoo.decoding import beam_search, generate, greedy_reference, sampler
from kzoo.decoding.fixed_shape_beam_search import compiled_beam_search, fixed_shape_beam_search
from kzoo.layers import DecoderBlock, MultiHead
from kzoo.models import Transformer
from kzoo.text import END


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(7)
    model = Transformer(
        source_vocabulary_size=40, num_encoder_layers=2, num_decoder_layers=2, hidden_dim=32, num_heads=4,
        intermediate_dim=64, dropout=0.0,
    )
    return model


SOURCE = np.array([[5, 6, 7, 8, 2, 0, 0], [9, 10, 11, 12, 13, 14, 2], [15, 2, 0, 0, 0, 0, 0]], dtype="int32")


@pytest.mark.parametrize("max_length", [None, 8], ids=["growing", "fixed"])
@pytest.mark.parametrize("options", [{}, {"normalize_first": True, "position_encoding": "learned"},
                                     {"tie_output_embedding": False}], ids=["tied", "pre-LN", "untied"])
def test_cached_decode_step_equals_the_full_decoder(options, max_length):
    keras.utils.set_random_seed(3)
    model = Transformer(40, 30, 2, 2, 16, 2, 32, max_sequence_length=16, **options)
    decoder_ids = np.array([[1, 20, 21, 22, 23], [1, 22, 23, 24, 25], [1, 3, 4, 0, 0]], dtype="int32")
    full = model({"encoder_token_ids": SOURCE, "decoder_token_ids": decoder_ids}).numpy()
    u, mask = model.encode(SOURCE)
    cache = model.initial_cache(u, max_length)
    one_at_a_time = []
    for i in range(5):
        logits, cache = model.decode_step(decoder_ids[:, i : i + 1], i, cache, mask)
        one_at_a_time.append(logits.numpy())
    np.testing.assert_allclose(np.concatenate(one_at_a_time, axis=1)[:2], full[:2], atol=1e-5)
    np.testing.assert_allclose(np.concatenate(one_at_a_time, axis=1)[2, :3], full[2, :3], atol=1e-5)
    cache = model.initial_cache(u, max_length)
    first, cache = model.decode_step(decoder_ids[:, :3], 0, cache, mask)
    rest, cache = model.decode_step(decoder_ids[:, 3:], 3, cache, mask)
    np.testing.assert_allclose(np.concatenate([first, rest], axis=1)[:2], full[:2], atol=1e-5)
    assert cache["self"][0][0].shape[2] == (max_length or 5)  # a growing cache holds just the 5 positions
    # A tied output projection is transposed once, into the state, not on every step; an untied one needs nothing.
    tied = options.get("tie_output_embedding", True)
    assert ("output_kernel" in cache) == tied
    if tied:
        np.testing.assert_array_equal(cache["output_kernel"].numpy(), model.target_embedding.embeddings.numpy().T)


def test_rows_of_one_sentence_share_its_encoder_keys_and_values():
    keras.utils.set_random_seed(4)
    model = Transformer(40, 30, 2, 2, 16, 2, 32, max_sequence_length=16)
    decoder_ids = np.array([[1, 20, 21], [1, 22, 23], [1, 3, 4], [1, 5, 6], [1, 7, 8], [1, 9, 10]], "int32")
    u, mask = model.encode(SOURCE)
    shared, per_row = model.initial_cache(u), model.initial_cache(np.repeat(u, 2, axis=0))
    shared["self"] = per_row["self"]  # two rows per sentence, as beam search's hypotheses
    for i in range(3):
        logits, shared = model.decode_step(decoder_ids[:, i : i + 1], i, shared, mask)
        expected, per_row = model.decode_step(decoder_ids[:, i : i + 1], i, per_row, np.repeat(mask, 2, axis=0))
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), atol=1e-5)
    assert shared["cross"][0][0].shape[0] == 3 and per_row["cross"][0][0].shape[0] == 6


class WideValues(DecoderBlock):
    """A decoder block whose attention values are wider than its keys (MultiHead's value_dim)."""

    def _multi_head(self, name, x_shape, x_prime_shape=None):
        layer = MultiHead(self.num_heads, 8, value_dim=12, name=name)
        layer.build(x_shape, x_prime_shape)
        return layer


def test_the_cache_takes_the_size_of_keys_and_of_values():
    block = WideValues(num_heads=2, intermediate_dim=32, dropout=0.0)
    x_prime, u = np.random.default_rng(0).normal(size=(2, 2, 4, 16)).astype("float32")
    full = block(x_prime, u).numpy()
    keys, values = block.empty_cache(2, 6, "float32")
    assert keys.shape == (2, 2, 6, 8) and values.shape == (2, 2, 6, 12)  # (batch, heads, max_length, size)
    cached, _ = block.decode_step(x_prime, 0, (keys, values), block.cross_attention.key_value(u))
    np.testing.assert_allclose(cached.numpy(), full, atol=1e-5)


def test_greedy_with_cache_gives_exactly_the_uncached_tokens(model):
    reference = greedy_reference(model, SOURCE, 10).numpy()
    cached = tf.function(lambda ids: generate(model, ids, 10))(SOURCE).numpy()
    np.testing.assert_array_equal(cached, reference)


class ScriptedModel:
    """Stands in for a Transformer: at step i, row r puts all probability on SCRIPT[r, i].

    Each row's script travels in its self-attention cache, (rows, 1, 1, steps), so it follows the row wherever the
    search moves or drops it."""

    SCRIPT = tf.constant([[7, 8, END, 9, 9, 9], [7, END, 9, 9, 9, 9], [5, 6, 7, 8, 9, 5]])
    target_vocabulary_size = 12

    def encode(self, ids):
        return tf.zeros([tf.shape(ids)[0], 1, 4]), tf.ones([tf.shape(ids)[0], 1], tf.bool)

    def initial_cache(self, u, max_length=None):
        return {"self": [tf.cast(self.SCRIPT, tf.float32)[:, None, None, :]], "cross": []}

    def decode_step(self, token_ids, index, cache, mask):
        script = tf.cast(cache["self"][0][:, 0, 0, :], tf.int32)
        return 10.0 * tf.one_hot(script[:, index], self.target_vocabulary_size)[:, None], cache


def test_generation_stops_each_sentence_at_its_end_token():
    tokens = generate(ScriptedModel(), np.ones((3, 2), "int32"), 6).numpy()
    np.testing.assert_array_equal(tokens, [[7, 8, END, 0, 0, 0], [7, END, 0, 0, 0, 0], [5, 6, 7, 8, 9, END]])


def test_each_sentence_ends_at_its_own_limit():
    tokens = generate(ScriptedModel(), np.ones((3, 2), "int32"), np.array([6, 6, 3])).numpy()
    np.testing.assert_array_equal(tokens, [[7, 8, END, 0, 0, 0], [7, END, 0, 0, 0, 0], [5, 6, END, 0, 0, 0]])


def test_beam_search_returns_finished_hypotheses_with_their_end_token():
    tokens = beam_search(ScriptedModel(), np.ones((3, 2), "int32"), 6, beam_size=3).numpy()
    np.testing.assert_array_equal(tokens, [[7, 8, END, 0, 0, 0], [7, END, 0, 0, 0, 0], [5, 6, 7, 8, 9, END]])


def test_beam_search_ends_each_sentence_at_its_own_limit():
    # What Translator does: each sentence gets the limit of its own source length, the batch runs to the largest.
    tokens = beam_search(ScriptedModel(), np.ones((3, 2), "int32"), np.array([6, 6, 3]), beam_size=3).numpy()
    np.testing.assert_array_equal(tokens, [[7, 8, END, 0, 0, 0], [7, END, 0, 0, 0, 0], [5, 6, END, 0, 0, 0]])


def test_a_settled_sentence_leaves_the_batch_with_the_result_it_has_alone(model):
    # Sentences stop at different steps (their limits differ); each one's result must not depend on the others.
    limits = np.array([9, 4, 6], "int32")
    together, steps = tf.function(lambda ids, limits: beam_search(model, ids, limits, beam_size=3,
                                                                  return_steps=True))(SOURCE, limits)
    for row, limit in enumerate(limits):
        alone = beam_search(model, SOURCE[row : row + 1], limits[row : row + 1], beam_size=3).numpy()[0]
        np.testing.assert_array_equal(together.numpy()[row, :limit], alone)
        assert not together.numpy()[row, limit:].any()
    assert int(steps) <= 9


def test_beam_of_one_without_penalty_is_greedy(model):
    greedy_tokens = generate(model, SOURCE, 10).numpy()
    beam_tokens = beam_search(model, SOURCE, 10, beam_size=1, length_penalty=0.0).numpy()
    np.testing.assert_array_equal(beam_tokens, greedy_tokens)


def sequence_log_prob(model, source, tokens):
    """log p(tokens | source) up to and including the first end token; an end forced at the limit counts 0."""
    length = int(np.flatnonzero(tokens == END)[0]) + 1 if END in tokens else len(tokens)
    scored = length - 1 if length == len(tokens) else length
    decoder = np.concatenate([[1], tokens[: length - 1]])[None].astype("int32")
    logits = model({"encoder_token_ids": source[None], "decoder_token_ids": decoder}).numpy()[0]
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
        -1, keepdims=True
    )
    return sum(log_probs[i, tokens[i]] for i in range(scored))


def test_beam_search_finds_at_least_as_likely_a_sequence_as_greedy(model):
    greedy_tokens = generate(model, SOURCE, 10).numpy()
    beam_tokens = beam_search(model, SOURCE, 10, beam_size=4, length_penalty=0.0).numpy()
    for source, g, b in zip(SOURCE, greedy_tokens, beam_tokens):
        if END in g and END in b:
            assert sequence_log_prob(model, source, b) >= sequence_log_prob(model, source, g) - 1e-4


def test_sampling_is_reproducible_and_respects_top_k(model):
    first = generate(model, SOURCE, 8, sampler(top_k=3, seed=5)).numpy()
    again = generate(model, SOURCE, 8, sampler(top_k=3, seed=5)).numpy()
    np.testing.assert_array_equal(first, again)
    # With top_k=1 sampling is greedy.
    np.testing.assert_array_equal(generate(model, SOURCE, 8, sampler(top_k=1, seed=9)).numpy(),
                                  generate(model, SOURCE, 8).numpy())


def test_top_p_keeps_the_smallest_set_reaching_p():
    logits = tf.math.log(tf.constant([[0.5, 0.3, 0.15, 0.05]]))
    pick = sampler(top_p=0.7, seed=1)
    seen = {int(pick(logits, step)[0]) for step in range(200)}
    assert seen == {0, 1}


@pytest.mark.parametrize("kwargs", [{"temperature": 0}, {"top_k": 0}, {"top_p": 1.5}])
def test_sampler_rejects_bad_arguments(kwargs):
    name, value = next(iter(kwargs.items()))
    with pytest.raises(ValueError, match=f"{name}={value}"):
        sampler(**kwargs)


@pytest.mark.parametrize("beam_size, length_penalty, early_stopping", [(3, 0.6, False), (1, 0.0, False),
                                                                      (4, 1.0, False), (4, 1.0, True)])
def test_fixed_shapes_compiled_by_xla_give_beam_searchs_ids(model, beam_size, length_penalty, early_stopping):
    limits = np.array([9, 4, 6], "int32")
    compiled = tf.function(lambda ids, limits: fixed_shape_beam_search(model, ids, limits, 12, beam_size,
                                                                       length_penalty, early_stopping),
                           jit_compile=True)
    ids, steps = compiled(SOURCE, limits)
    reference, reference_steps = beam_search(model, SOURCE, limits, beam_size, length_penalty, return_steps=True,
                                             early_stopping=early_stopping)
    np.testing.assert_array_equal(ids.numpy()[:, :9], reference.numpy())
    assert not ids.numpy()[:, 9:].any() and int(steps) == int(reference_steps)
    assert len({tuple(row) for row in reference.numpy().tolist()}) == 3  # three different translations


def test_fixed_shapes_end_each_scripted_sentence_where_beam_search_does():
    # Rows 0 and 1 end at steps 3 and 2; the search runs on for row 2 while their alive hypotheses keep going.
    ids, steps = fixed_shape_beam_search(ScriptedModel(), np.ones((3, 2), "int32"), np.array([6, 6, 6]), 8, 3)
    np.testing.assert_array_equal(ids, [[7, 8, END, 0, 0, 0, 0, 0], [7, END, 0, 0, 0, 0, 0, 0],
                                        [5, 6, 7, 8, 9, END, 0, 0]])
    assert int(steps) == 6


def test_bucketed_compiled_search_pads_to_its_buckets_and_gives_beam_searchs_ids(model):
    limits = np.array([9, 4, 6], "int32")
    seen = []

    def cache_length(padded_m):
        seen.append(padded_m)
        return padded_m + 10

    decode = compiled_beam_search(model, 3, 0.6, cache_length, max_sentences=4)
    ids, _ = decode(SOURCE, limits)  # 3 sentences of 7 tokens -> 4 of 16, a cache of 26 positions
    np.testing.assert_array_equal(ids, beam_search(model, SOURCE, limits, beam_size=3))
    assert int(seen[-1]) == 16
    one, _ = decode(SOURCE[2:, :2], limits[2:])  # one sentence of 2 tokens -> 1 of 16
    np.testing.assert_array_equal(one, beam_search(model, SOURCE[2:, :2], limits[2:], beam_size=3))
    with pytest.raises(ValueError, match="max_sentences=3 must be a power of two"):
        compiled_beam_search(model, 3, 0.6, cache_length, max_sentences=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="too many sentences"):
        compiled_beam_search(model, 3, 0.6, cache_length, max_sentences=2)(SOURCE, limits)

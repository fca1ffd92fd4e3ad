import numpy as np
import pytest
import tensorflow as tf

from kzoo.decoding.top_k import top_k


def expect_equal_to_tensorflows(values, k):
    scores, indices = top_k(values, k)
    expected = tf.math.top_k(values, k)
    np.testing.assert_array_equal(scores.numpy(), expected.values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected.indices.numpy())


@pytest.mark.parametrize("length", [32000, 5003, 2048])  # a multiple of the chunk, one padded, just long enough
def test_top_k_equals_tensorflows_on_random_rows(length):
    values = tf.random.stateless_normal([6, length], seed=[3, length])
    expect_equal_to_tensorflows(values, 8)
    expect_equal_to_tensorflows(values, 1)


def test_top_k_breaks_ties_as_tensorflow_does():
    rows = np.full((4, 4000), -1e9, "float32")  # row 0: all equal (a sentence forced to end, as beam search masks)
    rows[1, [3999, 70, 2000, 71]] = 5.0  # equal maxima in different chunks, out of index order
    rows[2, 64:128] = 1.0  # a whole chunk tied, and its neighbour's first entry too
    rows[2, 128] = 1.0
    rows[3] = np.repeat(np.arange(40, dtype="float32"), 100)  # runs of 100 equal values across chunk borders
    expect_equal_to_tensorflows(tf.constant(rows), 8)


def test_top_k_of_rows_with_fewer_finite_entries_than_k_takes_no_padding():
    rows = np.full((2, 5003), -np.inf, "float32")  # 5,003 entries: the last chunk is padded
    rows[0, [5, 4000]] = 1.0  # two finite entries for k = 8: six -inf ones must come from the row, not the padding
    rows[1, 5002] = -3.4e38  # at float32's lowest finite value, in the padded chunk
    expect_equal_to_tensorflows(tf.constant(rows), 8)
    _, indices = top_k(tf.constant(rows), 8)
    assert int(tf.reduce_max(indices)) < 5003


def test_top_k_compiled_by_xla_and_on_short_or_unknown_rows():
    values = tf.random.stateless_normal([3, 9000], seed=[1, 1])
    compiled = tf.function(lambda v: top_k(v, 8), jit_compile=True)(values)
    np.testing.assert_array_equal(compiled[1].numpy(), tf.math.top_k(values, 8).indices.numpy())
    expect_equal_to_tensorflows(tf.random.stateless_normal([2, 100], seed=[2, 2]), 8)  # short: TopK itself
    unknown = tf.function(lambda v: top_k(v, 4), input_signature=[tf.TensorSpec([None, None])])(values)
    np.testing.assert_array_equal(unknown[1].numpy(), tf.math.top_k(values, 4).indices.numpy())

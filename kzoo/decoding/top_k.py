"""The k largest entries of long rows, as `tf.math.top_k` gives them, without its per-element heap over the row.

Beam search takes the 2·beam best of beam × vocabulary extensions per sentence every step (32,000 entries a row for
the shipped translator). TensorFlow's CPU TopK walks each row through a k-heap, about 3 ns an entry: 3.2 ms of a
20 ms step at 32 sentences (128 hypotheses), nearly as long as the decoder's six feed-forward matmuls (3.8 ms). Here
the row is read once by a vectorised max over chunks, and only the k chunks holding the best maxima are searched
exactly.
"""

import tensorflow as tf

CHUNK = 64  # entries a chunk; the row's length need not be a multiple (it is padded)
MIN_CHUNKS_PER_K = 4  # rows shorter than this many chunks per k go straight to tf.math.top_k


def top_k(values, k, chunk=CHUNK):
    """(values, indices) of the `k` largest entries of each row of `values` (rows, n), the largest first: equal to
    `tf.math.top_k(values, k)`, ties included (the lower index first).

    Each row is cut into chunks of `chunk` entries. Order the entries by value, then by lower index: a chunk's best
    entry in that order ranks it among chunks (by its maximum, ties to the lower chunk, as TopK breaks them), and any
    of the row's k best entries lies in one of the k best-ranked chunks (else those k chunks' best entries would be
    k entries ahead of it). So TopK runs on the chunk maxima (n / chunk a row) and on those k chunks, taken in index
    order (k · chunk a row), and the indices map back. Rows of unknown or short length (fewer than 4k chunks) go to
    `tf.math.top_k` itself.

    Example:
    ```python
    from kzoo.decoding.top_k import top_k

    values = tf.random.stateless_normal([3, 5000], seed=[1, 2])
    scores, indices = top_k(values, 8)
    expected = tf.math.top_k(values, 8)
    assert (scores.numpy() == expected.values.numpy()).all() and (indices.numpy() == expected.indices.numpy()).all()
    ```
    """
    values = tf.convert_to_tensor(values)
    n = values.shape[-1]
    if values.shape.rank != 2 or n is None or n < MIN_CHUNKS_PER_K * k * chunk:
        return tuple(tf.math.top_k(values, k))
    rows, chunks = tf.shape(values)[0], -(-n // chunk)
    if chunks * chunk != n:
        # Padding at the dtype's lowest value (-inf for floats), after every real entry: a real entry of that value
        # wins the tie by its lower index, so the padding is never among the k best, as n >= k.
        lowest = float("-inf") if values.dtype.is_floating else values.dtype.min
        values = tf.pad(values, [[0, 0], [0, chunks * chunk - n]], constant_values=lowest)
    grouped = tf.reshape(values, [rows, chunks, chunk])
    best_chunks = tf.sort(tf.math.top_k(tf.reduce_max(grouped, axis=2), k).indices, axis=1)  # (rows, k), ascending
    candidates = tf.reshape(tf.gather(grouped, best_chunks, batch_dims=1), [rows, k * chunk])
    scores, position = tf.math.top_k(candidates, k)
    indices = tf.gather(best_chunks, position // chunk, batch_dims=1) * chunk + position % chunk
    return scores, indices

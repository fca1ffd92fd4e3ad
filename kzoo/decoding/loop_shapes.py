"""Shape invariants for a decoding while loop: a growing self-attention cache gains a position every step."""

import tensorflow as tf


def loop_shapes(loop_vars, cache_position, rows_vary=False):
    """The shapes `tf.while_loop` is told to keep for `loop_vars` (a tuple): each tensor's own, except that the
    self-attention caches in `loop_vars[cache_position]` (a `Transformer.initial_cache` state) have their length axis
    (axis 2) left open, and with `rows_vary` every tensor but scalars its first axis too (a batch that shrinks as
    sentences finish).

    Example:
    ```python
    from kzoo.decoding.loop_shapes import loop_shapes

    cache = {"self": [(tf.zeros([3, 2, 0, 4]), tf.zeros([3, 2, 0, 4]))], "cross": [tf.zeros([3, 2, 5, 4])]}
    shapes = loop_shapes((tf.constant(0), cache), cache_position=1)
    assert shapes[1]["self"][0][0].as_list() == [3, 2, None, 4] and shapes[1]["cross"][0].as_list() == [3, 2, 5, 4]
    assert loop_shapes((tf.constant(0), cache), 1, rows_vary=True)[1]["self"][0][0].as_list() == [None, 2, None, 4]
    ```
    """

    def own(value):  # a TensorArray travels as its flow, a scalar
        shape = value.flow.shape if isinstance(value, tf.TensorArray) else tf.convert_to_tensor(value).shape
        return tf.TensorShape([None]).concatenate(shape[1:]) if rows_vary and shape.rank else shape

    def open_length(shape):
        return shape[:2].concatenate([None]).concatenate(shape[3:])

    shapes = list(tf.nest.map_structure(own, loop_vars))
    cache = shapes[cache_position]
    shapes[cache_position] = {**cache, "self": tf.nest.map_structure(open_length, cache["self"])}
    return tuple(shapes)

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class MeanPooling(keras.layers.Layer):
    """The mean of a sequence's vectors over its real positions: padding (`padding_mask` 0 or False) is left out.

    Sentence-transformers checkpoints such as all-MiniLM-L6-v2 were trained to put a sentence's meaning in this
    mean, not in the [CLS] vector (their pooler is left as their base model had it), so heads and embedders on them
    read it here.

    Call arguments:
        sequence: float tensor (batch, seq, dim).
        padding_mask: bool or int tensor (batch, seq): True (1) for real positions.

    Returns:
        (batch, dim), in the layer's compute dtype; a row with no real position gives zeros.

    Example:
    ```python
    sequence = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")  # (batch, seq, dim)
    pooled = kzoo.layers.MeanPooling()(sequence, np.array([[1, 1, 0]]))  # the last position is padding
    assert keras.ops.convert_to_numpy(pooled).tolist() == [[2.0, 3.0]]
    ```
    """

    def call(self, sequence, padding_mask):
        mask = ops.expand_dims(ops.cast(padding_mask, sequence.dtype), axis=-1)
        total = ops.sum(sequence * mask, axis=1)
        return total / ops.maximum(ops.sum(mask, axis=1), ops.cast(1, sequence.dtype))

    def compute_output_shape(self, sequence_shape, padding_mask_shape=None):
        return (sequence_shape[0], sequence_shape[2])

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy of logits against sparse labels, counting real tokens only (labels other than `pad_id`).

    Args:
        pad_id: int. The label of padding, left out of the count. Defaults to 0.
        name: str. Defaults to "accuracy".

    Example:
    ```python
    metric = kzoo.metrics.MaskedAccuracy()
    labels = np.array([[3, 1, 0, 0]])  # two real tokens, then padding
    logits = np.eye(4)[[[3, 2, 0, 0]]]  # the first right, the second wrong; padding never counts
    metric.update_state(labels, logits)
    assert float(metric.result()) == 0.5
    ```
    """

    def __init__(self, pad_id=0, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        weight = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weight = weight * ops.cast(sample_weight, "float32")
        return super().update_state(correct, sample_weight=weight)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}

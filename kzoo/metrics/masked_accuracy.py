import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class MaskedAccuracy(keras.metrics.Mean):
    """Token accuracy of logits against sparse labels, counting real tokens only (labels other than `pad_id`)."""

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

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class SparseF1Score(keras.metrics.F1Score):
    """F1 score of one class, for a classifier's logits (batch, classes) against sparse int labels (batch,).

    F1 = 2·TP / (2·TP + FP + FN), counting the examples whose argmax or label is `positive_class`; GLUE reports it
    for MRPC with the positive class 1 ("equivalent"). It is `keras.metrics.F1Score` with its inputs converted:
    the labels one-hot, and the logits to the one-hot of their argmax (F1Score's own argmax would drop a maximum
    logit of exactly 0). With no true positive (e.g. every prediction negative) the score is 0.

    Args:
        positive_class: int. The class whose F1 is reported. Defaults to 1.
        name: str. Defaults to "f1_score".
        dtype: the metric's dtype.

    Example:
    ```python
    metric = kzoo.metrics.SparseF1Score()  # F1 of class 1
    labels = np.array([1, 1, 0, 0])
    logits = np.array([[0.0, 2.0], [3.0, 1.0], [0.0, 1.0], [2.0, 0.0]])  # predicts 1, 0, 1, 0
    metric.update_state(labels, logits)
    assert np.isclose(float(metric.result()), 0.5)  # TP 1, FP 1, FN 1: 2 / (2 + 1 + 1)
    # Compiled like any metric: model.compile(..., metrics=["accuracy", kzoo.metrics.SparseF1Score()])
    ```
    """

    def __init__(self, positive_class=1, name="f1_score", dtype=None):
        super().__init__(average=None, threshold=None, name=name, dtype=dtype)
        self.positive_class = positive_class

    def update_state(self, y_true, y_pred, sample_weight=None):
        num_classes = y_pred.shape[-1]
        if not 0 <= self.positive_class < num_classes:
            raise ValueError(
                f"positive_class={self.positive_class} is not a class of predictions with {num_classes} classes."
            )
        y_true = ops.one_hot(ops.reshape(ops.cast(y_true, "int32"), (-1,)), num_classes)  # (batch, classes)
        y_pred = ops.one_hot(ops.argmax(y_pred, axis=-1), num_classes)
        return super().update_state(y_true, y_pred, sample_weight)

    def result(self):
        return super().result()[self.positive_class]

    def get_config(self):
        return {"positive_class": self.positive_class, "name": self.name, "dtype": self.dtype}

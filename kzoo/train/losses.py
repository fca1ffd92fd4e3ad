import keras
from keras import ops
from keras.src.backend import set_keras_mask  # Keras losses average over the mask their output carries


@keras.saving.register_keras_serializable(package="kzoo")
class MaskedCrossEntropy(keras.losses.Loss):
    """Label-smoothed sparse cross-entropy from logits, averaged over real tokens only.

    With smoothing ε over V classes the target distribution is (1 - ε)·onehot(y) + ε/V, as in the paper's
    section 5.4, computed without materialising the one-hot: loss = lse - (1 - ε)·logit_y - ε·mean_k(logit_k), where
    lse is the log-sum-exp of the logits. Positions whose label is `pad_id` are excluded: the per-token losses carry a
    Keras mask, so the reduction divides by the number of real tokens, not the padded length.

    Args:
        label_smoothing: float in [0, 1). Defaults to 0.1.
        pad_id: int. The label that marks padding. Defaults to 0.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).

    Example:
    ```python
    loss = kzoo.train.MaskedCrossEntropy(label_smoothing=0.0)
    probabilities = np.array([[[0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0.9, 0.05, 0.05]]], "float32")
    value = float(loss(np.array([[1, 2, 0]]), np.log(probabilities)))  # logits (batch, seq, classes)
    assert np.isclose(value, -(np.log(0.25) + np.log(0.6)) / 2, rtol=1e-5)  # label 0, padding, is left out
    smoothed = kzoo.train.MaskedCrossEntropy(label_smoothing=0.1)  # the paper's 0.1
    ```
    """

    def __init__(self, label_smoothing=0.1, pad_id=0, name="masked_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing={label_smoothing} must be in [0, 1).")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        logits = ops.cast(y_pred, "float32")
        log_normalizer = ops.logsumexp(logits, axis=-1)  # (batch, seq)
        true_logit = ops.take_along_axis(logits, ops.expand_dims(y_true, -1), axis=-1)[..., 0]
        losses = log_normalizer - (1.0 - self.label_smoothing) * true_logit
        if self.label_smoothing:
            losses = losses - self.label_smoothing * ops.mean(logits, axis=-1)
        set_keras_mask(losses, ops.not_equal(y_true, self.pad_id))
        return losses

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config

"""Keras callbacks kzoo adds to what Keras ships."""

import time

import keras


class TimeBudget(keras.callbacks.Callback):
    """Stop training at the end of the epoch after which another epoch would overrun `minutes` of wall time.

    The time of the longest epoch so far is the estimate of the next one, so a run with a budget ends on time and
    on an epoch boundary (its checkpoints and logs stay whole).
    """

    def __init__(self, minutes):
        super().__init__()
        if minutes <= 0:
            raise ValueError(f"minutes={minutes} must be positive.")
        self.seconds = 60.0 * minutes
        self.stopped_epoch = None

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()
        self.longest_epoch = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        now = time.monotonic()
        self.longest_epoch = max(self.longest_epoch, now - self.epoch_start)
        if now - self.start + self.longest_epoch > self.seconds:
            self.stopped_epoch = epoch
            self.model.stop_training = True


def average_weights(model, weight_files):
    """Set `model`'s weights to the element-wise mean of the weights saved in `weight_files` (.weights.h5).

    Averaging the last few checkpoints of a run is a cheap ensemble (Vaswani et al. 2017, section 6.1).
    """
    if not weight_files:
        raise ValueError("average_weights needs at least one weights file.")
    total = None
    for path in weight_files:
        model.load_weights(path)
        values = [w.numpy() for w in model.weights]
        total = values if total is None else [t + v if _is_float(v) else v for t, v in zip(total, values)]
    model.set_weights([t / len(weight_files) if _is_float(t) else t for t in total])


def _is_float(value):
    return value.dtype.kind == "f"

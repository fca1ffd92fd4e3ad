"""MovingAverage: Polyak averaging of the weights during fit, saved after every epoch, while training goes on from
the weights themselves; every few steps, with the per-step momentum raised to that power; continued on resume."""

import keras
import numpy as np
import pytest

from kzoo.train.callbacks import MovingAverage

# Loss (w·1 - 0)^2 on one sample a step: the gradient is 2w, so SGD at 0.25 halves the kernel every step, from 1.
WEIGHTS = [0.5**step for step in range(1, 13)]


def model_and_fit(callbacks, epochs, steps=2, initial_epoch=0, model=None):
    if model is None:
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False,
                                                                         kernel_initializer="ones")])
        model.compile(keras.optimizers.SGD(0.25), "mse")
    model.fit(np.ones((steps, 1)), np.zeros((steps, 1)), batch_size=1, epochs=epochs, initial_epoch=initial_epoch,
              shuffle=False, verbose=0, callbacks=callbacks)
    return model


def kernel(model, path=None):
    if path is not None:
        model.load_weights(path)
    return model.get_weights()[0].item()


def expected(momentum, every, steps):
    average = WEIGHTS[0]
    for step in range(2, steps + 1):
        if step % every == 0:
            average = momentum**every * average + (1 - momentum**every) * WEIGHTS[step - 1]
    return average


def test_each_epoch_s_average_is_saved_and_training_goes_on_from_the_weights(tmp_path):
    average = MovingAverage(0.5, tmp_path / "average_{epoch:03d}.weights.h5", every=1)
    model = model_and_fit([average], epochs=2)
    # Halved every step (0.5, 0.25 | 0.125, 0.0625) only if the second epoch started from 0.25, not from the average
    # 0.375 the callback put in the model to save it; fit ends with the weights, not the average.
    assert kernel(model) == 0.0625
    assert kernel(model, tmp_path / "average_001.weights.h5") == 0.375
    assert kernel(model, tmp_path / "average_002.weights.h5") == 0.15625
    assert sorted(p.name for p in tmp_path.iterdir()) == ["average_001.weights.h5", "average_002.weights.h5"]


def test_every_few_steps_the_momentum_is_raised_to_their_number(tmp_path):
    model = model_and_fit([MovingAverage(0.9, tmp_path / "a_{epoch}.weights.h5", every=3)], epochs=2, steps=4)
    assert kernel(model, tmp_path / "a_1.weights.h5") == pytest.approx(expected(0.9, 3, 4), rel=1e-6)
    assert kernel(model, tmp_path / "a_2.weights.h5") == pytest.approx(expected(0.9, 3, 8), rel=1e-6)
    assert expected(0.9, 3, 8) != pytest.approx(expected(0.9, 1, 8), rel=1e-3)  # the steps in between are skipped


def test_a_resumed_fit_continues_the_average_from_its_epoch_s_file(tmp_path):
    pattern = tmp_path / "a_{epoch}.weights.h5"
    model = model_and_fit([MovingAverage(0.5, pattern, every=1)], epochs=1)
    # A new callback, as a resumed process has, picks up epoch 1's average instead of starting again at step 3.
    model_and_fit([MovingAverage(0.5, pattern, every=1)], epochs=2, initial_epoch=1, model=model)
    assert kernel(model, tmp_path / "a_2.weights.h5") == 0.15625


@pytest.mark.parametrize("arguments, message", [
    ((1.0, "a_{epoch}.weights.h5"), "momentum=1.0 must be in"),
    ((0.9, "a_{epoch}.h5"), "must end in '.weights.h5'"),
    ((0.9, "a_{epoch}.weights.h5", 0), "every=0 must be a whole number"),
])
def test_bad_settings_are_refused_when_made(arguments, message):
    with pytest.raises(ValueError, match=message):
        MovingAverage(*arguments)


MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from kzoo.train import MovingAverage

with tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    model.compile(keras.optimizers.SGD(0.25), "mse")
batches = tf.data.Dataset.from_tensor_slices((np.ones((6, 1), "float32"), np.zeros((6, 1), "float32"))).batch(2)
model.fit(batches, epochs=1, verbose=0, callbacks=[MovingAverage(0.5, sys.argv[1], every=1)])
weights = model.get_weights()[0].item()
model.load_weights(sys.argv[1].format(epoch=1))
print(weights, model.get_weights()[0].item())
"""


def test_under_a_mirrored_strategy_the_average_is_the_one_device_average(tmp_path):
    # Two replicas of one sample each: their mean gradient is the one-sample gradient 2w, so the kernel halves every
    # step as on one device, and the average of the mirrored variables' values is the same as there.
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", MIRRORED, str(tmp_path / "average_{epoch:03d}.weights.h5")],
                            capture_output=True, text=True, timeout=300, check=True)
    weights, average = map(float, result.stdout.split())
    assert weights == WEIGHTS[2] and average == pytest.approx(expected(0.5, 1, 3))

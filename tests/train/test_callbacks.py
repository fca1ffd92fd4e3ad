"""StepLoss: the loss of every step, recovered from the epoch means Keras reports, in a CSV file."""

import csv

import keras
import numpy as np
import pytest

from kzoo.train.callbacks import StepLoss
from kzoo.train.run import Run

# A model whose prediction stays 0 (learning rate 0), batches of 2 with targets 1, 2, 3, 4: batch losses 1, 4, 9, 16.
X = np.zeros((8, 1), "float32")
Y = np.repeat([1.0, 2.0, 3.0, 4.0], 2)[:, None].astype("float32")


def fit(callback, epochs=2):
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(keras.optimizers.SGD(0.0), "mse")
    model.fit(X, Y, batch_size=2, epochs=epochs, shuffle=False, verbose=0, callbacks=[callback])


def rows(path):
    with open(path) as file:
        return list(csv.DictReader(file))


def test_every_step_s_own_loss_not_the_epoch_s_running_mean(tmp_path):
    record = StepLoss(tmp_path / "steps.csv")
    fit(record)
    assert record.steps == list(range(1, 9))
    np.testing.assert_allclose(record.losses, [1, 4, 9, 16, 1, 4, 9, 16], rtol=1e-6)  # Keras shows 1, 2.5, 4.67, ...
    written = rows(tmp_path / "steps.csv")
    assert [(int(r["step"]), int(r["epoch"])) for r in written] == [(s, 1 + (s - 1) // 4) for s in range(1, 9)]
    np.testing.assert_allclose([float(r["loss"]) for r in written], record.losses, rtol=1e-5)
    steps, losses = StepLoss.read(tmp_path / "steps.csv")
    assert steps == record.steps
    np.testing.assert_allclose(losses, record.losses, rtol=1e-5)


def test_batches_of_different_sizes_give_each_step_its_own_loss(tmp_path):
    # 10 examples in batches of 4, 4 and 2 (targets 1, 2, 3: batch losses 1, 4, 9); Keras's running mean weights
    # each batch by its size, so two successive means alone would not recover the last step's 9.
    x, y = np.zeros((10, 1), "float32"), np.array([1] * 4 + [2] * 4 + [3] * 2, "float32")[:, None]
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(keras.optimizers.SGD(0.0), "mse")
    record = StepLoss(tmp_path / "steps.csv")
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=[record])
    np.testing.assert_allclose(record.losses, [1, 4, 9, 1, 4, 9], rtol=1e-6)


def test_every_n_steps_is_the_mean_of_those_steps(tmp_path):
    record = StepLoss(tmp_path / "steps.csv", every=2)
    fit(record)
    assert record.steps == [2, 4, 6, 8]
    np.testing.assert_allclose(record.losses, [2.5, 12.5, 2.5, 12.5], rtol=1e-6)


def test_append_continues_the_file_under_one_header(tmp_path):
    path = tmp_path / "steps.csv"
    fit(StepLoss(path), epochs=1)
    fit(StepLoss(path, append=True), epochs=1)  # a fresh model: its steps count from 1 again
    assert [r["step"] for r in rows(path)] == ["1", "2", "3", "4"] * 2
    assert path.read_text().count("step,epoch,loss") == 1
    fit(StepLoss(path), epochs=1)
    assert len(rows(path)) == 4  # without append, a new file


def test_every_must_be_a_positive_step_count():
    with pytest.raises(ValueError, match="every=0 must be"):
        StepLoss("steps.csv", every=0)


def test_every_run_records_its_steps_and_a_resumed_run_appends(tmp_path):
    with pytest.raises(RuntimeError):
        with Run(tmp_path / "run", "my_recipe", {"steps": 4}) as run:
            [record] = [c for c in run.callbacks() if isinstance(c, StepLoss)]
            assert record.path == str(tmp_path / "run" / "steps.csv") and not record.append
            raise RuntimeError("killed")
    with Run(tmp_path / "run", "my_recipe", {"steps": 4}, resume=True) as run:
        [record] = [c for c in run.callbacks() if isinstance(c, StepLoss)]
        assert record.append

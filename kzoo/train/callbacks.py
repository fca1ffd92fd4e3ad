"""Keras callbacks kzoo adds to what Keras ships."""

import time

import keras


class TimeBudget(keras.callbacks.Callback):
    """Stop training at the end of the epoch after which another epoch would overrun `minutes` of wall time, or in
    the middle of an epoch once the budget is spent.

    The time of the longest epoch so far is the estimate of the next one, so a run with a budget usually ends on
    time and on an epoch boundary; an epoch longer than the whole budget is cut when the budget runs out (Keras
    then ends the epoch as usual: validation, checkpoint, logs).

    Example:
    ```python
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    budget = kzoo.train.TimeBudget(minutes=0.5)
    model.fit(np.zeros((8, 2)), np.zeros((8, 1)), epochs=3, verbose=0, callbacks=[budget])
    budget.stopped_epoch  # None: three tiny epochs fit in half a minute
    ```
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
        self.epoch, self.epoch_start = epoch, time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start > self.seconds:
            self.stopped_epoch = getattr(self, "epoch", None)
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        now = time.monotonic()
        self.longest_epoch = max(self.longest_epoch, now - self.epoch_start)
        if now - self.start + self.longest_epoch > self.seconds:
            self.stopped_epoch = epoch
            self.model.stop_training = True


class LinearDecayToBudget(keras.callbacks.Callback):
    """Set the optimizer's learning rate before every step: a linear rise to `peak` over `warmup_steps`, then a
    linear fall that reaches 0 when the run's budget is spent, whichever of its two budgets comes first: `minutes`
    of wall time since training began, or `total_steps` optimizer steps.

    `lr = peak · min((step + 1) / warmup_steps, 1 - progress)`, where `progress` is the larger of the spent fractions
    of the two budgets. A run that stops on a budget ends annealed, at a learning rate near 0, instead of at the
    inverse-square-root schedule's still-high rate, which leaves the last weights noisy (Li, Yumer and Ramanan 2020,
    "Budgeted Training": a linear decay to zero over the budget beats the usual schedules cut short). The rise is the
    paper's: `TransformerSchedule(d, warmup_steps, scale)` has the same rate for the first `warmup_steps` steps with
    `peak = scale · d^-0.5 · warmup_steps^-0.5`. A time budget makes the schedule depend on the machine's speed, as
    the budget itself does; `minutes=None` makes it depend on steps alone (deterministic).

    The optimizer must hold a plain learning rate (a float, not a schedule), which this callback overwrites.

    Example:
    ```python
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(1.0), "mse")
    decay = kzoo.train.LinearDecayToBudget(peak=0.1, warmup_steps=2, total_steps=6)
    model.fit(np.zeros((12, 2)), np.zeros((12, 1)), batch_size=2, epochs=1, verbose=0, callbacks=[decay])
    np.round(decay.rates, 4).tolist()  # [0.05, 0.0833, 0.0667, 0.05, 0.0333, 0.0167]: the rate of each of the 6 steps
    ```
    """

    def __init__(self, peak, warmup_steps, minutes=None, total_steps=None, clock=time.monotonic):
        super().__init__()
        if not peak > 0:
            raise ValueError(f"peak={peak} must be positive.")
        if int(warmup_steps) < 1:
            raise ValueError(f"warmup_steps={warmup_steps} must be at least 1.")
        if minutes is None and total_steps is None:
            raise ValueError("LinearDecayToBudget needs a budget: give minutes, total_steps or both.")
        if minutes is not None and not minutes > 0:
            raise ValueError(f"minutes={minutes} must be positive.")
        if total_steps is not None and int(total_steps) <= int(warmup_steps):
            raise ValueError(f"total_steps={total_steps} must exceed warmup_steps={warmup_steps}, leaving steps "
                             "for the decay.")
        self.peak, self.warmup_steps = float(peak), int(warmup_steps)
        self.seconds = None if minutes is None else 60.0 * minutes
        self.total_steps = None if total_steps is None else int(total_steps)
        self.clock = clock
        self.rates = []

    def rate(self, step, elapsed):
        """The learning rate of optimizer step `step` (from 0) taken `elapsed` seconds after training began."""
        progress = max(elapsed / self.seconds if self.seconds else 0.0,
                       step / self.total_steps if self.total_steps else 0.0)
        return self.peak * max(0.0, min((step + 1) / self.warmup_steps, 1.0 - progress))

    def on_train_begin(self, logs=None):
        if isinstance(self.model.optimizer.get_config()["learning_rate"], dict):  # a serialized schedule
            raise ValueError("LinearDecayToBudget sets the optimizer's learning rate itself; compile the model with "
                             "an optimizer whose learning_rate is a float, not a schedule.")
        self.start, self.step = self.clock(), int(self.model.optimizer.iterations)

    def on_train_batch_begin(self, batch, logs=None):
        rate = self.rate(self.step, self.clock() - self.start)
        self.model.optimizer.learning_rate = rate
        self.rates.append(rate)
        self.step += 1


class StopAtStep(keras.callbacks.Callback):
    """Stop training once the optimizer has taken `total_steps` steps, even in the middle of an epoch.

    A plan of `total_steps` spread over `epochs` epochs gives epochs of `ceil(total_steps / epochs)` steps; without
    this stop the last epoch would run up to `epochs - 1` steps past the plan (at a learning rate the schedule has
    already taken to zero). Keras ends a stopped epoch as usual: validation, checkpoint, logs.

    Example:
    ```python
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(np.zeros((32, 2)), np.zeros((32, 1)), batch_size=4, epochs=3, steps_per_epoch=4, verbose=0,
              callbacks=[kzoo.train.StopAtStep(10)])
    int(model.optimizer.iterations)  # 10, not 12
    ```
    """

    def __init__(self, total_steps):
        super().__init__()
        if int(total_steps) < 1:
            raise ValueError(f"total_steps={total_steps} must be at least 1.")
        self.total_steps = int(total_steps)

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) >= self.total_steps:
            self.model.stop_training = True


class MovingAverage(keras.callbacks.Callback):
    """Polyak averaging of the weights during `fit`: an exponential moving average of the trainable weights, saved
    after every epoch to `pattern.format(epoch=N)` (N counted from 1, as `ModelCheckpoint` does).

    The average starts at the weights after the first step and then, every `every` steps, moves `1 - momentum**every`
    of the way to them: the average with `momentum` per step (Keras's `use_ema=True`, `ema_momentum`) taken over
    every `every`-th step's weights. Keras updates its average inside every step, ops for each variable one after
    another; here one update of the translation recipe's 127 variables takes about 70 ms on a 2-core CPU, so every 10
    steps costs about 1.5% of its 500 ms steps. Training goes on from the weights themselves, and `fit` ends with
    them in the model (Keras's own average would replace them): load the last file for the average. Each file is
    written to a temporary beside it and renamed into place, so a reader never takes a half-written one for a
    checkpoint; a resumed run (one that starts at epoch N > 0) continues the average from epoch N's file when there
    is one.

    Args:
        momentum: float in [0, 1). The average's momentum per step; 0.999 averages over about the last 1,000 steps.
        pattern: str or path. Where to save, with `{epoch}` in it; ends in ".weights.h5".
        every: int. Steps between updates of the average.

    Example:
    ```python
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    model.compile(keras.optimizers.SGD(0.25), "mse")  # the gradient is 2w: every step halves the kernel
    average = kzoo.train.MovingAverage(0.5, "average_{epoch:03d}.weights.h5", every=1)
    model.fit(np.ones((2, 1)), np.zeros((2, 1)), batch_size=1, epochs=1, verbose=0, callbacks=[average])
    assert model.get_weights()[0].item() == 0.25  # the weights: 1 -> 0.5 -> 0.25
    model.load_weights("average_001.weights.h5")
    assert model.get_weights()[0].item() == 0.375  # the average: 0.5, then 0.5 * 0.5 + 0.5 * 0.25
    ```
    """

    def __init__(self, momentum, pattern, every=10):
        super().__init__()
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum={momentum} must be in [0, 1): the share of the average kept at each step "
                             "(0.999 averages over about the last 1,000 steps).")
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every={every!r} must be a whole number of steps, at least 1.")
        if not str(pattern).endswith(".weights.h5"):
            raise ValueError(f"pattern={str(pattern)!r} must end in '.weights.h5', the ending Keras writes weights "
                             "files with.")
        self.momentum = float(momentum)
        self.pattern = str(pattern)
        self.every = every
        self._averages = None

    def on_train_begin(self, logs=None):
        self._averages = None
        self._steps = 0

    def on_epoch_begin(self, epoch, logs=None):
        import os

        if self._averages is None and epoch > 0 and os.path.exists(self.pattern.format(epoch=epoch)):
            weights = self.model.get_weights()
            self.model.load_weights(self.pattern.format(epoch=epoch))
            self._averages = [keras.Variable(v.numpy(), trainable=False) for v in self.model.trainable_variables]
            self.model.set_weights(weights)

    def on_train_batch_end(self, batch, logs=None):
        from keras import ops

        self._steps += 1
        if self._averages is None:
            self._averages = [keras.Variable(v.numpy(), trainable=False) for v in self.model.trainable_variables]
        elif self._steps % self.every == 0:
            kept = self.momentum**self.every
            for average, variable in zip(self._averages, self.model.trainable_variables):
                average.assign(ops.add(ops.multiply(average, kept),
                                       ops.multiply(ops.cast(variable, average.dtype), 1.0 - kept)))

    def on_epoch_end(self, epoch, logs=None):
        from kzoo.files import atomic_path

        if self._averages is None:
            return
        variables = self.model.trainable_variables
        weights = [variable.numpy() for variable in variables]
        for variable, average in zip(variables, self._averages):
            variable.assign(average)
        try:
            with atomic_path(self.pattern.format(epoch=epoch + 1)) as path:
                self.model.save_weights(path)
        finally:
            for variable, value in zip(variables, weights):
                variable.assign(value)


def average_weights(model, weight_files):
    """Set `model`'s weights to the element-wise mean of the weights saved in `weight_files` (.weights.h5).

    Averaging the last few checkpoints of a run is a cheap ensemble (Vaswani et al. 2017, section 6.1).

    Example:
    ```python
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_initializer="ones")])
    model.save_weights("a.weights.h5")  # kernel 1, bias 0
    model.set_weights([np.full((2, 1), 3.0), np.ones(1)])
    model.save_weights("b.weights.h5")  # kernel 3, bias 1
    kzoo.train.average_weights(model, ["a.weights.h5", "b.weights.h5"])
    assert model.get_weights()[0].tolist() == [[2.0], [2.0]] and model.get_weights()[1].tolist() == [0.5]
    ```
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


class StepLoss(keras.callbacks.Callback):
    """Record the training loss every `every` optimizer steps into the CSV file `path` (columns step, epoch, loss),
    one line as each is taken, so a killed run keeps what it recorded: the per-step curve that `history.csv`'s one
    line per epoch cannot show.

    Keras reports, after each batch, the mean loss of the epoch so far, weighted by batch size. `loss` here is the
    mean over the steps since the previous line (with `every=1`, the step's own loss), weighted the same way: the
    change in the model's loss tracker (its weighted sum and its count of examples) between the two lines, so it is
    exact whatever the batch sizes (the translation recipe's length-bucketed batches hold different numbers of
    sentences). A model without Keras's loss tracker falls back to two successive epoch means, which is exact only
    when the batches are of one size. `step` is the optimizer's step count, so a resumed run (`append=True`) goes on
    where it left off. `steps` and `losses` hold what this callback recorded; `StepLoss.read(path)` reads a
    file back, e.g. a run folder's `steps.csv`.

    Args:
        path: str or path. The CSV file, created (or appended to) when training begins.
        every: int. Steps between lines. Defaults to 1.
        append: bool. Add to an existing file instead of starting a new one. Defaults to False.

    Example:
    ```python
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, kernel_initializer="zeros")])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    record = kzoo.train.StepLoss("steps.csv")
    model.fit(np.ones((8, 1)), np.ones((8, 1)), batch_size=4, epochs=2, verbose=0, callbacks=[record])
    record.steps  # [1, 2, 3, 4]
    record.losses[0]  # 1.0: the first step's own loss, (1 - 0)²
    kzoo.train.StepLoss.read("steps.csv")[0]  # [1, 2, 3, 4]: the steps, then their losses
    ```
    """

    def __init__(self, path, every=1, append=False):
        super().__init__()
        if int(every) < 1:
            raise ValueError(f"every={every} must be a whole number of steps, at least 1.")
        self.path = str(path)
        self.every = int(every)
        self.append = append
        self.steps, self.losses = [], []

    @staticmethod
    def read(path):
        """The steps and losses a `StepLoss` wrote to `path`: two lists, (int steps, float losses)."""
        import csv

        with open(path, newline="") as file:
            rows = list(csv.DictReader(file))
        return [int(row["step"]) for row in rows], [float(row["loss"]) for row in rows]

    def on_train_begin(self, logs=None):
        import os

        fresh = not (self.append and os.path.exists(self.path) and os.path.getsize(self.path))
        self._file = open(self.path, "a" if self.append else "w")
        if fresh:
            self._file.write("step,epoch,loss\n")
            self._file.flush()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self._seen, self._total = 0.0, 0.0  # examples (or batches) this epoch and their summed loss, at the last line

    def _epoch_sums(self, batch, logs):
        """(examples so far this epoch, their summed loss): Keras's loss tracker, reset at every epoch's start, or,
        without one, (batches, epoch mean × batches)."""
        tracker = getattr(self.model, "_loss_tracker", None)
        if tracker is not None and hasattr(tracker, "total") and hasattr(tracker, "count"):
            return (float(keras.ops.convert_to_numpy(tracker.count)),
                    float(keras.ops.convert_to_numpy(tracker.total)))
        return batch + 1.0, float(logs["loss"]) * (batch + 1)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations)
        if step % self.every or logs is None or "loss" not in logs:
            return
        seen, total = self._epoch_sums(batch, logs)
        loss = (total - self._total) / (seen - self._seen)
        self._seen, self._total = seen, total
        self.steps.append(step)
        self.losses.append(loss)
        self._file.write(f"{step},{self.epoch + 1},{loss:.6g}\n")
        self._file.flush()

    def on_train_end(self, logs=None):
        self._file.close()

"""LinearDecayToBudget: the rate of every step from the warm-up and whichever budget binds, and the rate Keras uses."""

import keras
import numpy as np
import pytest

from kzoo.train.callbacks import LinearDecayToBudget


class Clock:
    """A clock that advances `seconds` each time it is read."""

    def __init__(self, seconds):
        self.now, self.seconds = 0.0, seconds

    def __call__(self):
        self.now += self.seconds
        return self.now


def fit(decay, steps, optimizer=None):
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
    model.compile(optimizer or keras.optimizers.SGD(1.0), "mse")
    model.fit(np.ones((steps, 1)), np.ones((steps, 1)), batch_size=1, epochs=1, shuffle=False, verbose=0,
              callbacks=[decay])
    return model


def test_the_steps_budget_gives_a_warm_up_then_a_fall_to_zero():
    decay = LinearDecayToBudget(peak=1.0, warmup_steps=4, total_steps=10)
    fit(decay, 10)
    # min((n + 1) / 4, 1 - n / 10) for steps n = 0..9: the rise meets the fall at step 2; step 10 would run at 0.
    np.testing.assert_allclose(decay.rates, [0.25, 0.5, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], rtol=1e-6)


def test_the_time_budget_binds_when_it_comes_first():
    # Each read of the clock adds 6 s: training begins at 6 s, step n starts at 6(n + 2) s, i.e. 6(n + 1) s in;
    # a one-minute budget is spent 10% a step, faster than the 100-step budget.
    decay = LinearDecayToBudget(peak=2.0, warmup_steps=1, minutes=1.0, total_steps=100, clock=Clock(6.0))
    fit(decay, 12)
    expected = [2.0 * max(0.0, 1.0 - 0.1 * (n + 1)) for n in range(12)]
    np.testing.assert_allclose(decay.rates, expected, atol=1e-12)
    assert decay.rates[-3:] == [0.0, 0.0, 0.0]


def test_each_step_updates_the_weights_at_its_own_rate():
    # Dense(1) from 0 on x = y = 1 with SGD: the gradient of (w - 1)^2 is 2(w - 1), so w' = w + 2 · lr · (1 - w).
    decay = LinearDecayToBudget(peak=0.1, warmup_steps=2, total_steps=5)
    model = fit(decay, 5, keras.optimizers.SGD(123.0))  # the compiled rate is overwritten before the first step
    w = 0.0
    for rate in decay.rates:
        w += 2 * rate * (1 - w)
    assert float(model.get_weights()[0][0, 0]) == pytest.approx(w, rel=1e-6)
    assert decay.rates == pytest.approx([0.05, 0.08, 0.06, 0.04, 0.02])


def test_bad_budgets_and_a_schedule_optimizer_are_refused():
    with pytest.raises(ValueError, match="needs a budget"):
        LinearDecayToBudget(peak=1.0, warmup_steps=10)
    with pytest.raises(ValueError, match="total_steps=10 must exceed warmup_steps=10"):
        LinearDecayToBudget(peak=1.0, warmup_steps=10, total_steps=10)
    with pytest.raises(ValueError, match="minutes=0 must be positive"):
        LinearDecayToBudget(peak=1.0, warmup_steps=10, minutes=0)
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    with pytest.raises(ValueError, match="learning_rate is a float, not a schedule"):
        fit(LinearDecayToBudget(peak=1.0, warmup_steps=1, total_steps=4), 4, keras.optimizers.SGD(schedule))

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kzoo")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The paper's learning rate: `scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`.

    It rises linearly for `warmup_steps` steps, then decays with the inverse square root of the step number
    (Vaswani et al. 2017, section 5.3, where scale is 1 and warmup_steps 4000). Steps count from 1.

    Args:
        hidden_dim: int. d_model.
        warmup_steps: int. Defaults to 4000.
        scale: float. A constant factor on the whole schedule. Defaults to 1.0.

    Example:
    ```python
    schedule = kzoo.train.TransformerSchedule(hidden_dim=512, warmup_steps=4000)
    rates = [float(schedule(step)) for step in (0, 3999, 15999)]  # optimizer.iterations 0 is the paper's step 1
    np.testing.assert_allclose(rates, [512**-0.5 * 4000**-1.5, 512**-0.5 * 4000**-0.5, 512**-0.5 * 16000**-0.5],
                               rtol=1e-5)
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)  # the paper's Adam
    ```

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 5.3.
    """

    def __init__(self, hidden_dim, warmup_steps=4000, scale=1.0):
        if warmup_steps <= 0:
            raise ValueError(f"warmup_steps={warmup_steps} must be positive.")
        self.hidden_dim = hidden_dim
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32") + 1.0, 1.0)
        warmup = ops.cast(self.warmup_steps, "float32")
        return self.scale * self.hidden_dim**-0.5 * ops.minimum(ops.rsqrt(step), step * warmup**-1.5)

    def get_config(self):
        return {"hidden_dim": self.hidden_dim, "warmup_steps": self.warmup_steps, "scale": self.scale}


@keras.saving.register_keras_serializable(package="kzoo")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's fine-tuning learning rate: a linear rise from 0 to the peak, then a linear fall to 0.

    `lr(step) = peak · min(step / warmup_steps, (total_steps - step) / (total_steps - warmup_steps))`, and 0 from
    `total_steps` on. Steps count from 0, Keras's `optimizer.iterations`, so the first update has learning rate 0 and
    the peak falls on step `warmup_steps` (Hugging Face's `get_linear_schedule_with_warmup`). Devlin et al. 2018 use 10%
    warm-up; their code decays from step 0 rather than from the end of the warm-up, so it peaks lower, at
    `peak · (1 - warmup_steps / total_steps)`. Keras has no schedule of this shape: `CosineDecay(warmup_steps=...)`
    rises linearly but falls along a cosine, and `PolynomialDecay(power=1)` falls linearly with no warm-up.

    Args:
        peak_learning_rate: float. The learning rate at step `warmup_steps`, e.g. 2e-5.
        total_steps: int. The number of training steps; the rate reaches 0 there.
        warmup_steps: int. Steps of linear warm-up, less than `total_steps`; 0 starts at the peak.

    Example:
    ```python
    schedule = kzoo.train.WarmupLinearDecay(2e-5, total_steps=6315, warmup_steps=631)  # SST-2: 3 epochs of 32
    assert float(schedule(0)) == 0.0 and np.isclose(float(schedule(631)), 2e-5) and float(schedule(6315)) == 0.0
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.01)
    ```

    References:
        [Devlin et al. 2018](https://arxiv.org/abs/1810.04805)
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps):
        if peak_learning_rate <= 0:
            raise ValueError(f"peak_learning_rate={peak_learning_rate} must be positive.")
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(
                f"warmup_steps={warmup_steps} must be at least 0 and less than total_steps={total_steps}, leaving "
                "steps for the decay."
            )
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        rise = step / self.warmup_steps if self.warmup_steps else 1.0
        fall = (self.total_steps - step) / (self.total_steps - self.warmup_steps)
        return self.peak_learning_rate * ops.clip(ops.minimum(rise, fall), 0.0, 1.0)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }

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

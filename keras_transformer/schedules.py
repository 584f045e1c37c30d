"""The learning-rate schedule of "Attention Is All You Need"."""

import keras
from keras import ops

from keras_transformer._validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup then inverse square-root decay (the paper, eq. 3).

    `lr(t) = scale * d_model^-0.5 * min(s^-0.5, s * warmup_steps^-1.5)` with
    `s = t + 1` for the 0-based optimizer iteration `t`, so that the first
    update already has a non-zero rate. The peak, at `s = warmup_steps`, is
    `scale * (d_model * warmup_steps)^-0.5`.

    Args:
        d_model: model width.
        warmup_steps: number of warmup steps.
        scale: multiplier of the whole schedule.

    Example:

    >>> schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98,
    ...                                   epsilon=1e-9)
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        for name, value in (("d_model", d_model), ("warmup_steps", warmup_steps)):
            check_positive_int(name, value)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = float(scale)

    def __call__(self, step):
        s = ops.cast(step, "float32") + 1.0
        decay = ops.rsqrt(s)
        warmup = s * (float(self.warmup_steps) ** -1.5)
        return self.scale * (float(self.d_model) ** -0.5) * ops.minimum(decay, warmup)

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }

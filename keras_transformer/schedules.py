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
    `scale * (d_model * warmup_steps)^-0.5`. `WarmupSchedule.from_peak`
    builds the same schedule from its peak instead, as fairseq's
    `inverse_sqrt` scheduler and most recipes state it (`--lr 0.005
    --warmup-updates 2000`): `lr = peak * min(s / warmup_steps,
    sqrt(warmup_steps / s))`.

    Args:
        d_model: model width.
        warmup_steps: number of warmup steps.
        scale: multiplier of the whole schedule.

    Example:

    >>> schedule = WarmupSchedule(d_model=512, warmup_steps=4000)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98,
    ...                                   epsilon=1e-9)
    >>> round(schedule.peak_learning_rate, 6)  # (512 * 4000) ** -0.5
    0.000699
    >>> peaked = WarmupSchedule.from_peak(0.005, d_model=128, warmup_steps=2000)
    >>> round(float(peaked(1999)), 6), round(float(peaked(7999)), 6)  # peak, then 1/sqrt
    (0.005, 0.0025)
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        for name, value in (("d_model", d_model), ("warmup_steps", warmup_steps)):
            check_positive_int(name, value)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive. Received: scale={scale!r}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = float(scale)

    @classmethod
    def from_peak(cls, peak_learning_rate, d_model, warmup_steps=4000):
        """The schedule whose rate peaks at `peak_learning_rate` after
        `warmup_steps` (its `scale` is derived; the config keeps `scale`)."""
        if isinstance(peak_learning_rate, bool) or not peak_learning_rate > 0:
            raise ValueError(
                "`peak_learning_rate` must be positive. "
                f"Received: peak_learning_rate={peak_learning_rate!r}"
            )
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        return cls(
            d_model, warmup_steps, scale=peak_learning_rate * (d_model * warmup_steps) ** 0.5
        )

    @property
    def peak_learning_rate(self):
        """The highest rate, reached at step `warmup_steps`."""
        return self.scale * (self.d_model * self.warmup_steps) ** -0.5

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

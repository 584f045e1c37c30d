"""The optimizer of "Attention Is All You Need", under any Keras backend."""

import keras

from keras_transformer.schedules import WarmupSchedule


def paper_adam(d_model, warmup_steps, lr_scale=1.0, peak_learning_rate=None):
    """Adam with beta_1 0.9, beta_2 0.98, epsilon 1e-9 under `WarmupSchedule`.

    The one place the training recipe's optimizer is defined: the trainer
    (`training.recipe.compile_for_training`) and code that trains without
    TensorFlow both take it from here.

    Args:
        d_model: model width (the schedule's `d_model`).
        warmup_steps: steps of linear warmup.
        lr_scale: multiplier of the paper's schedule.
        peak_learning_rate: the schedule's peak instead (see
            `WarmupSchedule.from_peak`); then `lr_scale` must stay 1.

    Returns:
        A `keras.optimizers.Adam`.

    Example:

    >>> optimizer = paper_adam(d_model=128, warmup_steps=2000, peak_learning_rate=0.005)
    >>> print(f"{float(optimizer.learning_rate):.3g}")  # the first update's rate
    2.5e-06
    """
    if peak_learning_rate is None:
        schedule = WarmupSchedule(d_model, warmup_steps, scale=lr_scale)
    elif lr_scale != 1.0:
        raise ValueError(
            "Give `lr_scale` or `peak_learning_rate`, not both. Received: "
            f"lr_scale={lr_scale!r}, peak_learning_rate={peak_learning_rate!r}"
        )
    else:
        schedule = WarmupSchedule.from_peak(peak_learning_rate, d_model, warmup_steps)
    return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)

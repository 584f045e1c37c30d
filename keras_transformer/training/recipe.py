"""The training recipe of the paper, shared by the trainer and the tuner."""

from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.optimizers import paper_adam
from keras_transformer.training import keras_adapter


def compile_for_training(
    model,
    *,
    warmup_steps,
    lr_scale=1.0,
    peak_learning_rate=None,
    label_smoothing=0.1,
    jit_compile=False,
    strategy=None,
):
    """Compiles a built `Transformer` with the paper's optimizer and loss.

    Adam with beta_1 0.9, beta_2 0.98 and epsilon 1e-9 under
    `WarmupSchedule(d_model, warmup_steps, scale=lr_scale)`
    (`optimizers.paper_adam`), label-smoothed
    cross-entropy and accuracy over non-padding tokens; then readies the
    model for `fit` under `strategy` (see `keras_adapter.prepare_for_fit`).
    Call it under `strategy`'s scope.

    Args:
        model: a built `Transformer`.
        warmup_steps: steps of linear warmup.
        lr_scale: multiplier of the schedule.
        peak_learning_rate: the schedule's peak instead (see
            `WarmupSchedule.from_peak`); then `lr_scale` must stay 1.
        label_smoothing: the loss's label smoothing.
        jit_compile: compile the train step with XLA.
        strategy: the `tf.distribute.Strategy` training runs under.

    Returns:
        `model`.
    """
    model.compile(
        optimizer=paper_adam(model.d_model, warmup_steps, lr_scale, peak_learning_rate),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=label_smoothing),
        metrics=[MaskedAccuracy()],
        jit_compile=jit_compile,
    )
    return keras_adapter.prepare_for_fit(model, strategy)

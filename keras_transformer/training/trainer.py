"""The training job: corpus -> tokenizers -> batches -> `model.fit`."""

import os

import keras
import tensorflow as tf

from keras_transformer.models.transformer import Transformer
from keras_transformer.training import (
    averaging,
    host_memory,
    keras_adapter,
    preparation,
    recipe,
    strategies,
)
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training.atomic_files import save_weights_atomically
from keras_transformer.training.backup import Backup
from keras_transformer.training.config import TrainConfig
from keras_transformer.training.run_directory import (
    RunDirectory,
    build_run_model,
    check_run_reuse,
    load_weights_file,
    weights_path,
)


def devices():
    """The accelerators and CPUs the Keras backend computes on, by name."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return [str(d) for d in jax.devices()]
    if backend == "torch":
        import torch

        return [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    return [d.name for d in tf.config.list_logical_devices() if d.device_type in ("GPU", "CPU")]


def set_precision(mixed):
    """Float32, or mixed precision suited to the device: float16 on GPU,
    bfloat16 on CPU. Returns the policy name."""
    if not mixed:
        policy = "float32"
    elif any("cpu" not in name.lower() for name in devices()):
        policy = "mixed_float16"
    else:
        policy = "mixed_bfloat16"
    keras.config.set_dtype_policy(policy)
    return policy


def build_model(config, source_vocab, target_vocab, strategy=None):
    """The compiled `Transformer` of `config`, ready for `fit` (call under
    `strategy`'s scope): the preset's with `model_overrides`, or with
    `init_from`, the run's architecture and weights."""
    if config.init_from is not None:
        model = _initial_model(config, source_vocab, target_vocab)
    else:
        model = Transformer.from_preset(
            config.preset,
            source_vocab,
            target_vocab,
            **{"max_length": max(config.max_length, 256), **config.model_overrides},
        )
        model.build(((None, None), (None, None)))
    for part in config.freeze:
        getattr(model, part).trainable = False
    return recipe.compile_for_training(
        model,
        warmup_steps=config.warmup_steps,
        lr_scale=config.lr_scale,
        peak_learning_rate=config.peak_learning_rate,
        label_smoothing=config.label_smoothing,
        jit_compile=_compiled(config),
        strategy=strategy,
    )


def _compiled(config):
    """Whether the train step is compiled: asked for, or under JAX (whose
    step without `jit` runs op by op, orders of magnitude slower)."""
    return config.jit_compile or keras.backend.backend() == "jax"


def _initial_model(config, source_vocab, target_vocab):
    """The `init_from` run's model with its weights (and new dropout)."""
    start = RunDirectory(config.init_from)
    model = build_run_model(start, overrides=config.model_overrides)
    sizes = (model.source_vocab_size, model.target_vocab_size)
    if sizes != (source_vocab, target_vocab):
        raise ValueError(
            f"The tokenizers give vocabularies of {source_vocab} and {target_vocab} pieces; "
            f"the model of {start.path} has {sizes[0]} and {sizes[1]}"
        )
    if config.max_length > model.max_length:
        raise ValueError(
            f"`max_length` {config.max_length} is over the {model.max_length} positions "
            f"of the model of {start.path}"
        )
    load_weights_file(model, weights_path(start))
    return model


def _start_from(config, run, log):
    """Copies the `init_from` run's tokenizers and generation settings into
    a new run, so that it tokenizes, and its exports decode, as that run."""
    import shutil

    start = RunDirectory(config.init_from)
    if not os.path.exists(start.model_config):
        raise FileNotFoundError(
            f"init_from: {start.path} is not a run ({start.model_config} is missing)"
        )
    if run.has_tokenizers():
        return
    folder = os.path.dirname(start.source_tokenizer)
    target = os.path.dirname(run.source_tokenizer)
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(folder)):
        shutil.copy2(os.path.join(folder, name), os.path.join(target, name))
    if os.path.exists(start.generation):
        shutil.copy2(start.generation, run.generation)
    log(f"Starting from {start.path}: its architecture, weights and tokenizers")


def train(config, log=print):
    """Runs (or resumes) the training job described by `config`.

    A run directory that already holds a backup is resumed from it: the
    same command after a crash or kill continues where it stopped. A
    finished run is never trained into again, nor a run of other settings
    (`check_run_reuse`): its weights, best weights and history would be
    overwritten or mixed with the new run's.

    Args:
        config: a `TrainConfig` (or a dict of its keys).
        log: where progress lines go.

    Returns:
        `(model, history)`, the trained model (holding the averaged weights
        when `average_last` is set) and the `keras.callbacks.History`.
    """
    if isinstance(config, dict):
        config = TrainConfig.from_dict(config)
    if config.backend is not None and config.backend != keras.backend.backend():
        raise ValueError(
            f"The run asks for backend={config.backend!r}, but Keras was imported with "
            f"{keras.backend.backend()!r}: set KERAS_BACKEND={config.backend} before Keras "
            "is imported (`keras-transformer train --backend` does)"
        )
    keras.utils.set_random_seed(config.seed)
    host_memory.retain_freed_memory()
    policy = set_precision(config.mixed_precision)
    strategy = strategies.get_strategy(config.strategy, config.devices)
    worker_index, is_chief = strategies.worker_info()
    log(
        f"Backend {keras.backend.backend()}; devices: {devices()}; policy {policy}; "
        f"replicas {strategy.num_replicas_in_sync}"
    )

    run = RunDirectory(config.output_dir)
    check_run_reuse(run, config.to_dict())
    os.makedirs(run.path, exist_ok=True)
    if is_chief:
        run.write_json(run.config, config.to_dict())
    if config.init_from is not None and is_chief:
        _start_from(config, run, log)

    data = preparation.prepare_data(config, run, log, save=is_chief)
    # A compiled step compiles a program for each shape it is given.
    compiled = _compiled(config)
    train_batches = data.train_batches(
        config.batch_tokens,
        seed=config.seed,
        repeat=config.steps_per_epoch is not None,
        pad_to_edges=compiled,
    )
    valid_batches = data.valid_batches(config.batch_tokens, pad_to_edges=compiled)

    with strategy.scope():
        model = build_model(
            config, data.source_tokenizer.vocab_size, data.target_tokenizer.vocab_size, strategy
        )
    if is_chief:
        run.write_json(run.model_config, {**model.get_config(), "dtype": None})

    callbacks = callbacks_lib.make_callbacks(
        run, config, valid_batches is not None, is_chief=is_chief, worker_index=worker_index
    )
    with keras_adapter.data_ends_epochs():
        history = model.fit(
            train_batches,
            validation_data=valid_batches,
            epochs=config.epochs,
            steps_per_epoch=config.steps_per_epoch,
            callbacks=callbacks,
            verbose=config.verbose,
            shuffle=False,  # the pipeline shuffles; Keras would only warn
        )
    weights_path = (
        run.final_weights if is_chief else run.join(f"final.worker_{worker_index}.weights.h5")
    )
    save_weights_atomically(model, weights_path)
    if is_chief and not os.path.exists(run.best_weights):
        save_weights_atomically(model, run.best_weights)
    # Only now: a kill before this line resumes rather than starts over.
    next(callback for callback in callbacks if isinstance(callback, Backup)).remove()
    log(f"Saved {weights_path}")
    if is_chief and config.average_last:
        _average(run, config, model, valid_batches, log)
    return model, history


def _average(run, config, model, valid_batches, log):
    """Averages the kept epochs into the run, and says how it validates."""
    averaged, epochs = averaging.average_checkpoints(run.path, last=config.average_last)
    model.set_weights(averaged.get_weights())
    log(f"Averaged the weights of epochs {epochs[0]}-{epochs[-1]} into {run.averaged_weights}")
    if valid_batches is None:
        return
    # The same metrics as the epochs' validation, so the two read alike.
    with keras_adapter.data_ends_epochs():
        scores = model.evaluate(valid_batches, verbose=0, return_dict=True)
    info = run.read_json(run.averaged_info)
    info.update({f"val_{k}": float(v) for k, v in scores.items()})
    run.write_json(run.averaged_info, info)
    log("Averaged weights: " + ", ".join(f"val_{k} {v:.4f}" for k, v in scores.items()))

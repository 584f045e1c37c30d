"""Exporters by name: each format of `keras-transformer export` a class.

As OpenNMT-tf's `register_exporter`, each format is a small class
registered under the name `--format` takes; `ExportOptions` checks its
settings against the format's, and `export_run` hands the exporter the run,
loaded once, and a staging folder. This module imports neither TensorFlow
nor Keras: a format's own stack loads when it writes.

Example, a format of one's own (a folder with the model's config):

>>> import json, os
>>> @register_exporter("config_only")
... class ConfigExporter(Exporter):
...     def export(self, run, output_dir, options):
...         os.makedirs(output_dir)
...         with open(os.path.join(output_dir, "config.json"), "w") as f:
...             json.dump(run.model.get_config(), f)
>>> "config_only" in exporter_names()
True
>>> del _EXPORTERS["config_only"]
"""

import typing

from keras_transformer.export import ctranslate2

_EXPORTERS = {}


class LoadedRun(typing.NamedTuple):
    """What an exporter is handed: the run's model and tokenizers, loaded
    once, and the run's path."""

    model: typing.Any
    source_tokenizer: typing.Any
    target_tokenizer: typing.Any
    path: str


class Exporter:
    """A format of `keras-transformer export`.

    Subclasses set what the format takes (`compiled_shapes`,
    `quantizations`, `extra`), refuse in `check` what it cannot keep, and
    write in `export`.
    """

    # The format's name under `--format`, set by `register_exporter`.
    name = None
    # The extra the format needs, and a module of it that must import
    # (checked before the run loads).
    extra = None
    extra_module = None
    # Whether the SavedModel's own settings apply: --jit-compile, its
    # shapes (--batch-sizes, --lengths, --no-split-batches), --no-check and
    # --no-warmup.
    savedmodel_settings = False
    # The --quantization values it takes besides "none".
    quantizations = ()

    def check(self, options):
        """Raises a `ValueError` naming a setting of `options` (an
        `ExportOptions`) this format cannot keep; called before Keras loads."""

    def export(self, run, output_dir, options):
        """Writes `run` (a `LoadedRun`) into `output_dir`, which does not
        exist yet, as `options` (an `ExportOptions`) say."""
        raise NotImplementedError


def register_exporter(name):
    """A class decorator registering an `Exporter` subclass as `--format NAME`.

    Raises:
        ValueError: `name` is registered already.
    """

    def decorator(cls):
        if name in _EXPORTERS:
            raise ValueError(f"An exporter named {name!r} is registered already")
        cls.name = name
        _EXPORTERS[name] = cls
        return cls

    return decorator


def exporter_names():
    """The registered formats, in registration order."""
    return tuple(_EXPORTERS)


def get_exporter(name):
    """An instance of the exporter registered as `name`.

    Raises:
        ValueError: no exporter has that name.
    """
    if name not in _EXPORTERS:
        raise ValueError(f"`format` must be one of {exporter_names()}. Received: {name!r}")
    return _EXPORTERS[name]()


@register_exporter("savedmodel")
class SavedModelExporter(Exporter):
    """TensorFlow's SavedModel for TF Serving, plain or compiled with XLA
    (`--jit-compile`); see `export_translator`."""

    extra = "serving"
    extra_module = "tensorflow_serving"
    savedmodel_settings = True

    def export(self, run, output_dir, options):
        from keras_transformer.export.servable import export_translator

        export_translator(
            run.model, run.source_tokenizer, run.target_tokenizer, output_dir,
            options.generation_config(), jit_compile=options.jit_compile,
            batch_sizes=options.batch_sizes, lengths=options.lengths,
            split_batches=options.split_batches, check=options.check, warmup=options.warmup,
        )  # fmt: skip


@register_exporter("ctranslate2")
class CTranslate2Exporter(Exporter):
    """A CTranslate2 model directory; see `export_ctranslate2`. It keeps no
    generation settings: CTranslate2 takes them when it translates."""

    extra = "ctranslate2"
    extra_module = "ctranslate2"
    quantizations = ctranslate2.QUANTIZATIONS

    def check(self, options):
        given = [f"--{name.replace('_', '-')}" for name in options.generation]
        if given:
            raise ValueError(
                f"{', '.join(given)}: --format ctranslate2 keeps no decoding settings; "
                "give them to CTranslate2's translate_batch"
            )

    def export(self, run, output_dir, options):
        ctranslate2.export_ctranslate2(run.model, run.source_tokenizer, run.target_tokenizer,
                                       output_dir, options.quantization)  # fmt: skip


@register_exporter("huggingface")
class MarianExporter(Exporter):
    """A Marian checkpoint folder in the Hugging Face format; see
    `export_marian`. `generate()` has neither GNMT's length penalty nor the
    SavedModel's sampling signature, so those settings are refused."""

    extra = "huggingface"
    extra_module = "safetensors"

    def check(self, options):
        sampling = [f"--{name.replace('_', '-')}" for name in options.generation
                    if name.startswith("sampling_")]  # fmt: skip
        if sampling:
            raise ValueError(f"{', '.join(sampling)} applies to --format savedmodel only")
        if options.generation.get("length_penalty") == "gnmt":
            raise ValueError(
                "--length-penalty gnmt: generate() has the power form only "
                "(--format huggingface writes --length-penalty power and --alpha)"
            )

    def export(self, run, output_dir, options):
        from keras_transformer.export.marian import export_marian

        export_marian(run.model, run.source_tokenizer, run.target_tokenizer, output_dir,
                      options.generation_config())  # fmt: skip

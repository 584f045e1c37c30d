"""`ExportOptions`: every setting of `keras-transformer export` in one object.

As `ServerOptions` is for `serve` (and TF Serving's `Server::Options` for
its flags), `export` derives its flags and their help from this dataclass,
takes the same keys from `--config FILE`, and checks them here, in one
place. It imports neither TensorFlow nor Keras, so that the command line
can describe itself without loading them.
"""

import dataclasses

from keras_transformer._validation import options_from_dict
from keras_transformer._version_folders import check_version_number
from keras_transformer.decoding.generation_config import GenerationConfig

FORMATS = ("savedmodel", "ctranslate2", "huggingface")
WEIGHTS = ("auto", "averaged", "best", "final")
QUANTIZATIONS = ("none", "int8", "int8_float32", "int16", "float16", "bfloat16")


@dataclasses.dataclass
class ExportOptions:
    """The settings of `keras-transformer export`; the keys of its `--config`.

    Attributes:
        run: the run directory of `train` (required).
        export_base: the model's folder of numbered versions, as TF
            Serving's --model_base_path (required).
        version: version number of the export; none is one above the
            newest present, or 1.
        weights: which weights of the run: auto (the averaged weights if
            the run has them, else the best on validation), averaged, best
            or final.
        format: savedmodel, for TF Serving; ctranslate2, a CTranslate2
            model directory with its vocabularies, for CTranslate2's
            Translator (needs the [ctranslate2] extra); huggingface, a
            Marian checkpoint folder (MarianMTModel, MarianTokenizer) for
            transformers and its converters, for a run Marian can express
            (needs the [huggingface] extra), whose generation_config.json
            takes the generation settings but sampling (power length
            penalty only; suppressed phrases and disable_unk as
            bad_words_ids). CTranslate2 keeps none: it takes them when it
            translates.
        generation: the `GenerationConfig` settings given (its fields'
            flags: --beam-size, --alpha, ...), over the run's own
            (`generation.json`, an imported checkpoint's), else the
            defaults; the export records the result.
        jit_compile: compile the id-level work with XLA, in fixed shapes
            that the warmup records all run; TF Serving then needs
            --xla_cpu_compilation_enabled=true (off: an export any TF
            Serving runs).
        batch_sizes: with jit_compile, the batch sizes requests are padded
            to, as TF Serving's allowed_batch_sizes; none is 1,8,32.
        split_batches: with jit_compile, a batch of two rows or more runs
            as two programs of half its size at once (faster on a server's
            two or more inter-op threads); off, as one program (faster with
            one inter-op thread).
        lengths: with jit_compile, the compiled token lengths; none is
            16,24,32,48,64,... up to the longest input or translation.
        quantization: with format ctranslate2, the weights' type.
    """

    # Checked by the command line before Keras loads.
    CHECKED_BEFORE_KERAS = True
    # Whose fields are flags of `export` too, over the run's own settings.
    FLAG_GROUPS = (GenerationConfig,)

    run: str | None = None
    export_base: str | None = None
    version: int | None = None
    weights: str = dataclasses.field(default="auto", metadata={"choices": WEIGHTS})
    format: str = dataclasses.field(default="savedmodel", metadata={"choices": FORMATS})
    generation: dict = dataclasses.field(default_factory=dict, metadata={"flag": False})
    jit_compile: bool = False
    batch_sizes: list | None = None
    lengths: list | None = None
    split_batches: bool = True
    quantization: str = dataclasses.field(default="none", metadata={"choices": QUANTIZATIONS})

    def __post_init__(self):
        for name in ("run", "export_base"):
            if not getattr(self, name):
                raise ValueError(f"export needs --{name.replace('_', '-')}")
        for name, choices in (("weights", WEIGHTS), ("format", FORMATS),
                              ("quantization", QUANTIZATIONS)):  # fmt: skip
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"`{name}` must be one of {choices}. Received: {getattr(self, name)!r}"
                )
        if self.version is not None:
            check_version_number(self.version)
        self.generation = {k: v for k, v in dict(self.generation).items() if v is not None}
        # Each setting checked now, before Keras loads, whatever the run's are.
        GenerationConfig().merged(**self.generation)
        self.batch_sizes = _positive_ints("batch_sizes", self.batch_sizes)
        self.lengths = _positive_ints("lengths", self.lengths)
        if self.format != "savedmodel":
            for flag, value in (("--jit-compile", self.jit_compile),
                                ("--batch-sizes", self.batch_sizes),
                                ("--lengths", self.lengths)):  # fmt: skip
                if value:
                    raise ValueError(f"{flag} applies to --format savedmodel only")
        if self.format != "ctranslate2" and self.quantization != "none":
            raise ValueError("--quantization applies to --format ctranslate2 only")
        self._check_decoding_for_the_format()
        check_compiled_shapes(self.jit_compile, self.batch_sizes, self.lengths,
                              self.split_batches)  # fmt: skip

    def _check_decoding_for_the_format(self):
        """Refuses generation settings a format cannot keep (they were
        silently dropped): CTranslate2 takes them when it translates, and
        `generate()` has neither GNMT's penalty nor this export's sampling
        signature."""
        if self.format == "savedmodel":
            return
        given = [f"--{name.replace('_', '-')}" for name in self.generation]
        if self.format == "ctranslate2":
            if given:
                raise ValueError(
                    f"{', '.join(given)}: --format ctranslate2 keeps no decoding settings; "
                    "give them to CTranslate2's translate_batch"
                )
            return
        sampling = [flag for flag in given if flag.startswith("--sampling-")]
        if sampling:
            raise ValueError(f"{', '.join(sampling)} applies to --format savedmodel only")
        if self.generation.get("length_penalty") == "gnmt":
            raise ValueError(
                "--length-penalty gnmt: generate() has the power form only "
                "(--format huggingface writes --length-penalty power and --alpha)"
            )

    def generation_config(self):
        """The export's `GenerationConfig`: the settings given over the
        run's own (`generation.json`; the defaults where it has none)."""
        return GenerationConfig.for_run(self.run).merged(**self.generation)

    @classmethod
    def from_dict(cls, values):
        """Options from a `--config` file's keys (and the flags'), the
        generation settings among them by their own names (`beam_size:
        5`); unknown keys are errors."""
        values = dict(values)
        generation = dict(values.pop("generation", None) or {})
        for name in GenerationConfig.field_names():
            if name in values:
                generation[name] = values.pop(name)
        if generation:
            values["generation"] = generation
        return options_from_dict(cls, values, "export")


def check_compiled_shapes(jit_compile, batch_sizes, lengths, split_batches=True):
    """Refuses compiled shapes without `jit_compile`."""
    if not jit_compile and (batch_sizes or lengths or not split_batches):
        raise ValueError(
            "`batch_sizes`, `lengths` and `split_batches` (--batch-sizes, --lengths, "
            "--no-split-batches) are the shapes of `jit_compile=True` (--jit-compile) only"
        )


def _positive_ints(name, value):
    """`value` as a list of positive ints (`"1,8,32"` read as the command
    line gives it); None stays None."""
    if value is None:
        return None
    try:
        values = [int(v) for v in (value.split(",") if isinstance(value, str) else value)
                  if str(v).strip()]  # fmt: skip
    except (TypeError, ValueError):
        values = []
    if not values or min(values) <= 0:
        raise ValueError(f"`{name}`: expected positive ints separated by commas: {value!r}")
    return values


def export(options):
    """Writes the export that `options` (`ExportOptions`) describe; returns
    its path."""
    generation = options.generation_config()
    if options.format == "huggingface":
        from keras_transformer.interop.marian_export import export_marian_run

        return export_marian_run(options.run, options.export_base, version=options.version,
                                 weights=options.weights, generation=generation)  # fmt: skip
    if options.format == "ctranslate2":
        from keras_transformer.export.ctranslate2 import export_ctranslate2_run

        return export_ctranslate2_run(
            options.run, options.export_base, version=options.version,
            weights=options.weights, quantization=options.quantization,
        )  # fmt: skip
    from keras_transformer.export.servable import export_run

    return export_run(
        options.run, options.export_base, version=options.version, weights=options.weights,
        generation=generation, jit_compile=options.jit_compile,
        batch_sizes=options.batch_sizes, lengths=options.lengths,
        split_batches=options.split_batches,
    )  # fmt: skip

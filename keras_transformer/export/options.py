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
from keras_transformer.decoding.compiled_shapes import check_compiled_shapes
from keras_transformer.decoding.generation_config import GenerationConfig
from keras_transformer.export.exporters import exporter_names, get_exporter

FORMATS = exporter_names()
WEIGHTS = ("auto", "averaged", "best", "final")
# Every registered format's, for the flag's choices; each format checks its own.
QUANTIZATIONS = ("none",) + tuple(
    dict.fromkeys(q for name in FORMATS for q in get_exporter(name).quantizations)
)


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
        check: with format savedmodel, load the export as TF Serving does
            and check that it can serve (`check_servable`) before the
            version is renamed into place.
        warmup: with format savedmodel, write TF Serving's warmup records
            (off: the first requests of each shape pay for its kernels).
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
    check: bool = True
    warmup: bool = True

    def __post_init__(self):
        for name in ("run", "export_base"):
            if not getattr(self, name):
                raise ValueError(f"export needs --{name.replace('_', '-')}")
        exporter = get_exporter(self.format)
        for name, choices in (("weights", WEIGHTS), ("quantization", QUANTIZATIONS)):
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
        if not exporter.savedmodel_settings:
            for flag, given in (("--jit-compile", self.jit_compile),
                                ("--batch-sizes", self.batch_sizes),
                                ("--lengths", self.lengths),
                                ("--no-split-batches", not self.split_batches),
                                ("--no-check", not self.check),
                                ("--no-warmup", not self.warmup)):  # fmt: skip
                if given:
                    raise ValueError(f"{flag} does not apply to --format {self.format}")
        if self.quantization != "none" and self.quantization not in exporter.quantizations:
            takes = ", ".join(("none",) + exporter.quantizations)
            raise ValueError(
                f"--quantization {self.quantization}: --format {self.format} takes {takes}"
            )
        # Refuses generation settings the format cannot keep (they were
        # silently dropped once).
        exporter.check(self)
        check_compiled_shapes(self.jit_compile, self.batch_sizes, self.lengths,
                              self.split_batches)  # fmt: skip

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

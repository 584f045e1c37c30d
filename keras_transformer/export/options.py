"""`ExportOptions`: every setting of `keras-transformer export` in one object.

As `ServerOptions` is for `serve` (and TF Serving's `Server::Options` for
its flags), `export` derives its flags and their help from this dataclass,
takes the same keys from `--config FILE`, and checks them here, in one
place. It imports neither TensorFlow nor Keras, so that the command line
can describe itself without loading them.
"""

import dataclasses

from keras_transformer._validation import (
    check_alpha,
    check_positive_int,
    check_sampling,
    options_from_dict,
)
from keras_transformer._version_folders import check_version_number

FORMATS = ("savedmodel", "ctranslate2", "huggingface")
PENALTIES = ("gnmt", "power")
# The decoding settings of a run that has none of its own (`generation.json`
# holds an imported checkpoint's).
DECODING_DEFAULTS = {
    "beam_size": 4,
    "alpha": 0.6,
    "length_penalty": "gnmt",
    "max_output_length": 128,
    "forced_end": False,
    "renormalize": False,
}
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
            takes the decoding settings below but sampling (power length
            penalty only). CTranslate2 keeps none: it takes them when it
            translates.
        beam_size: beams of the beam search; 1 decodes greedily. None: the
            run's generation settings (an imported checkpoint's), else 4.
        alpha: length-penalty exponent of the beam search; 0 for none,
            negative to favour short translations.
            None: the run's, else 0.6.
        length_penalty: the penalty's form: gnmt, ((5 + length) / 6) **
            alpha; power, length ** alpha, as transformers' generate().
            None: the run's, else gnmt.
        max_output_length: longest translation, in tokens (--max-length is
            its older name). None: the run's, else 128.
        forced_end: a translation reaching max_output_length ends there
            with the end token, as generate()'s forced_eos_token_id. None:
            the run's, else off.
        renormalize: the searches normalize each step's probabilities again
            once padding is removed, as generate()'s renormalize_logits.
            None: the run's, else off.
        sampling_temperature: temperature of the translate_sample
            signature: above 1 flatter, below 1 sharper.
        sampling_topk: translate_sample draws from the k most likely
            tokens; 0 for all, 1 is greedy.
        sampling_topp: translate_sample draws from the fewest most likely
            tokens whose probability reaches p (nucleus sampling); 1 for
            all.
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

    run: str | None = None
    export_base: str | None = None
    version: int | None = None
    weights: str = dataclasses.field(default="auto", metadata={"choices": WEIGHTS})
    format: str = dataclasses.field(default="savedmodel", metadata={"choices": FORMATS})
    beam_size: int | None = None
    alpha: float | None = None
    length_penalty: str | None = dataclasses.field(default=None, metadata={"choices": PENALTIES})
    max_output_length: int | None = dataclasses.field(default=None)
    forced_end: bool | None = None
    renormalize: bool | None = None
    sampling_temperature: float = 1.0
    sampling_topk: int = 0
    sampling_topp: float = 1.0
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
        for name in ("beam_size", "max_output_length"):
            if getattr(self, name) is not None:
                check_positive_int(name, getattr(self, name))
        if self.length_penalty not in (None, *PENALTIES):
            raise ValueError(
                f"`length_penalty` must be one of {PENALTIES}. Received: {self.length_penalty!r}"
            )
        if self.alpha is not None:
            check_alpha(self.alpha)
        names = ("sampling_temperature", "sampling_topk", "sampling_topp")
        check_sampling(*(getattr(self, name) for name in names), names=names)
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
        """Refuses decoding settings a format cannot keep (they were
        silently dropped): CTranslate2 takes them when it translates, and
        `generate()` has neither GNMT's penalty nor this export's sampling
        signature."""
        if self.format == "savedmodel":
            return
        given = [f"--{field.name.replace('_', '-')}" for field in dataclasses.fields(self)
                 if field.name.startswith("sampling_")
                 and getattr(self, field.name) != field.default]  # fmt: skip
        if self.format == "ctranslate2":
            given = [f"--{name.replace('_', '-')}" for name in DECODING_DEFAULTS
                     if getattr(self, name) is not None] + given  # fmt: skip
            if given:
                raise ValueError(
                    f"{', '.join(given)}: --format ctranslate2 keeps no decoding settings; "
                    "give them to CTranslate2's translate_batch"
                )
        if given:
            raise ValueError(f"{', '.join(given)} applies to --format savedmodel only")
        if self.length_penalty == "gnmt":
            raise ValueError(
                "--length-penalty gnmt: generate() has the power form only "
                "(--format huggingface writes --length-penalty power and --alpha)"
            )

    def generation(self, generation=None):
        """The run's generation settings (`generation.json`, or None) with
        this export's decoding options over them, for --format huggingface."""
        settings = {**DECODING_DEFAULTS, **(generation or {})}
        settings.update({name: getattr(self, name) for name in DECODING_DEFAULTS
                         if getattr(self, name) is not None})  # fmt: skip
        return settings

    @classmethod
    def from_dict(cls, values):
        """Options from a `--config` file's keys; unknown keys are errors."""
        return options_from_dict(cls, dict(values), "export")

    def decoding(self, generation=None):
        """The keyword arguments of `export_run` for a SavedModel.

        Args:
            generation: the run's generation settings (`generation.json`,
                keys of `DECODING_DEFAULTS`), used where an option is None.
        """
        settings = self.generation(generation)
        return dict(
            beam_size=settings["beam_size"], alpha=settings["alpha"],
            length_penalty=settings["length_penalty"], forced_end=settings["forced_end"],
            renormalize=settings["renormalize"], max_output_length=settings["max_output_length"],
            sampling_temperature=self.sampling_temperature, sampling_topk=self.sampling_topk,
            sampling_topp=self.sampling_topp, jit_compile=self.jit_compile,
            batch_sizes=self.batch_sizes, lengths=self.lengths,
            split_batches=self.split_batches,
        )  # fmt: skip


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
    if options.format == "huggingface":
        from keras_transformer.interop.marian_export import export_marian_run
        from keras_transformer.training.run_directory import read_generation

        generation = options.generation(read_generation(options.run))
        return export_marian_run(options.run, options.export_base, version=options.version,
                                 weights=options.weights, generation=generation)  # fmt: skip
    if options.format == "ctranslate2":
        from keras_transformer.export.ctranslate2 import export_ctranslate2_run

        return export_ctranslate2_run(
            options.run, options.export_base, version=options.version,
            weights=options.weights, quantization=options.quantization,
        )  # fmt: skip
    from keras_transformer.export.servable import export_run
    from keras_transformer.training.run_directory import read_generation

    decoding = options.decoding(read_generation(options.run))
    return export_run(options.run, options.export_base, version=options.version,
                      weights=options.weights, **decoding)  # fmt: skip

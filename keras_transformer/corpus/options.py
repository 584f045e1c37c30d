"""`CorpusOptions`: every setting of `keras-transformer corpus` in one object.

The command derives its flags and their help from this dataclass and
takes the same keys from `--config FILE`, as `train`, `export` and `serve`
do. It imports neither TensorFlow nor an engine.
"""

import dataclasses

from keras_transformer._validation import check_positive_int, options_from_dict

TASKS = ("translate", "nbest", "score")
ENGINES = ("local", "ray", "beam")
# Shard names carry five digits (`-00000-of-00002`, as Beam's `-SSSSS-of-
# NNNNN`): more shards would take names that `read_shards`, and the check
# that a job never writes over another's output, do not see.
MAX_SHARDS = 99_999


def check_shards(shards):
    """Raises a `ValueError` unless `shards` is an int in [1, `MAX_SHARDS`]."""
    check_positive_int("shards", shards)
    if shards > MAX_SHARDS:
        raise ValueError(
            f"`shards` must be at most {MAX_SHARDS} (the shards' names have five digits). "
            f"Received: shards={shards}"
        )


@dataclasses.dataclass
class CorpusOptions:
    """The settings of `keras-transformer corpus`; the keys of its `--config`.

    Attributes:
        model: an export base or one version directory, plain or
            --jit-compile (required).
        version: version under an export base; none is the newest.
        task: translate (each line's translation and score), nbest (the
            export's n-best list: as many as its beams) or score (the
            log-probability of each --target line given its --input line).
        signature: the signature that translates; none is the task's own
            (serving_default, translate_nbest, score); translate also
            takes translate_greedy or translate_sample.
        input: a glob of text files (`**` reaches into subfolders), one
            sentence a line, plain or .gz, UTF-8 (required).
        target: with --task score, a glob of their translations, line by
            line: the files pair with the inputs' in sorted order.
        target_prefix: with --task translate or nbest, a glob of target
            prefixes, line by line as --target: each translation continues
            its line's prefix (an empty line: none), through the export's
            translate_prefix or translate_prefix_nbest; the records keep
            it in their target_prefix column.
        output: the prefix of the JSON Lines shards
            (PREFIX-00000-of-00001.jsonl), one record a line with its file
            and 0-based line (required).
        shards: how many output shards the records are dealt into.
        engine: local (this process), ray (Ray Data over an actor pool
            of model holders, on the cluster of --ray-address) or beam
            (Apache Beam's RunInference; every flag this command does not
            know goes to Beam's PipelineOptions: --runner and the runner's
            own, e.g. --direct_num_workers 2 --direct_running_mode
            multi_processing).
        max_batch_size: most sentences the model runs at once; sentences
            are sorted by length within a few batches' worth.
        workers: with ray, the model holders (one model each).
        worker_threads: TensorFlow threads of each model's session
            (intra-op and inter-op, as TF Serving's
            --tensorflow_intra_op_parallelism); none is 1 with ray and beam
            (a worker is one CPU, as Ray schedules its holders, so that
            workers on one machine do not contend for its cores) and
            TensorFlow's own (every core) with local.
        xla_cache_dir: a folder where TensorFlow keeps the XLA programs
            a --jit-compile export compiles, as serve --xla-cache-dir:
            each worker reads what an earlier job or worker of this
            kind of machine compiled instead of compiling it again. Give
            a path every worker reaches (on one machine, any folder);
            none compiles in each worker.
        ray_address: with ray, the cluster's HOST:PORT (as ray start
            printed it); none starts a Ray of this machine alone.
        beam_args: with beam, Beam's pipeline options (on the command
            line, every flag this command does not know).
    """

    # Checked by the command line before Keras loads.
    CHECKED_BEFORE_KERAS = True

    model: str | None = None
    version: int | None = None
    task: str = dataclasses.field(default="translate", metadata={"choices": TASKS})
    signature: str | None = None
    input: str | None = None
    target: str | None = None
    target_prefix: str | None = None
    output: str | None = None
    shards: int = 1
    engine: str = dataclasses.field(default="local", metadata={"choices": ENGINES})
    max_batch_size: int = 64
    workers: int = 2
    worker_threads: int | None = None
    xla_cache_dir: str | None = None
    ray_address: str | None = None
    # With --engine beam, the rest of the command line (no flag of its own).
    beam_args: list = dataclasses.field(default_factory=list, metadata={"flag": False})

    def __post_init__(self):
        for name in ("model", "input", "output"):
            if not getattr(self, name):
                raise ValueError(f"corpus needs --{name}")
        for name, choices in (("task", TASKS), ("engine", ENGINES)):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"`{name}` must be one of {choices}. Received: {getattr(self, name)!r}"
                )
        check_shards(self.shards)
        for name in ("max_batch_size", "workers"):
            check_positive_int(name, getattr(self, name))
        if self.worker_threads is not None:
            check_positive_int("worker_threads", self.worker_threads)
        if (self.task == "score") != (self.target is not None):
            raise ValueError("--target goes with --task score, and --task score needs it")
        if self.target_prefix is not None and self.task == "score":
            raise ValueError("--target-prefix goes with --task translate or nbest")
        if self.ray_address is not None and self.engine != "ray":
            raise ValueError("--ray-address goes with --engine ray")
        if self.beam_args and self.engine != "beam":
            raise ValueError(
                f"unrecognized arguments: {' '.join(self.beam_args)} "
                "(only --engine beam passes flags on, to Beam)"
            )

    @property
    def paired(self):
        """`(glob, key)` of the records' second column: the translations
        of --task score, the prefixes of --target-prefix, or `(None,
        "target")`."""
        if self.target_prefix is not None:
            return self.target_prefix, "target_prefix"
        return self.target, "target"

    @property
    def run_signature(self):
        """The signature to run: `signature`, else with --target-prefix the
        task's prefix signature; None is the task's own."""
        if self.signature is None and self.target_prefix is not None:
            from keras_transformer.runtime.signatures import PREFIX_SIGNATURES

            return PREFIX_SIGNATURES[{"translate": "serving_default",
                                      "nbest": "translate_nbest"}[self.task]]  # fmt: skip
        return self.signature

    @property
    def threads(self):
        """Each model's session threads: `worker_threads`, or the engine's
        default (None: TensorFlow's own)."""
        if self.worker_threads is not None:
            return self.worker_threads
        return None if self.engine == "local" else 1

    @classmethod
    def from_dict(cls, values):
        """Options from a `--config` file's keys; unknown keys are errors."""
        return options_from_dict(cls, values, "corpus")

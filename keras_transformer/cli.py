"""`keras-transformer`: a thin command-line shell over the library."""

import argparse
import dataclasses
import json
import logging
import os
import sys
import traceback
import typing

from keras_transformer._validation import check_positive_int, shown

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def int32(text):
    """A flag's value as TensorFlow's int32 config fields take it."""
    value = int(text)
    if not -(2**31) <= value < 2**31:
        raise argparse.ArgumentTypeError(f"{text} is outside the 32-bit integer range")
    return value


def json_value(text):
    """A dict flag's value: JSON text, or the path of a JSON file."""
    if os.path.isfile(text):
        try:
            with open(text, encoding="utf-8") as f:
                return json.load(f)
        except ValueError as error:  # not JSON, or not UTF-8
            raise argparse.ArgumentTypeError(f"{text} is not a JSON file: {error}") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{shown(text)} is neither JSON ({error}) nor a JSON file"
        ) from None


def _flag_help(doc, field, default, run_default=False):
    """`doc`, then the field's choices and default, for `--help`;
    `run_default`: the setting defaults to the run's own, else `default`."""
    parts = [doc.rstrip(".") + "." if doc else ""]
    choices = field.metadata.get("choices")
    if choices:
        parts.append(f"Choices: {', '.join(map(str, choices))}.")
    if run_default:
        if isinstance(default, bool):
            default = "on" if default else "off"
        parts.append(f"Default: the run's, else {default if default != () else 'none'}.")
    elif default is dataclasses.MISSING:
        parts.append("Required.")
    elif isinstance(default, bool):
        parts.append(f"Default: {'on' if default else 'off'}.")
    elif default is None:
        if "(required" not in doc:
            parts.append("Default: none.")
    else:
        parts.append(f"Default: {json.dumps(default) if isinstance(default, dict) else default}.")
    return " ".join(p for p in parts if p).replace("%", "%%")


def lines_file(path):
    """A phrases flag's value: the non-blank lines of a UTF-8 file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"{path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise argparse.ArgumentTypeError(
            f"{path}: line {line} is not UTF-8 (byte {data[error.start]:#04x})"
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _add_config_flags(parser, config_cls, run_default=False, exclude=()):
    """One flag per field of the dataclass `config_cls`, with its type,
    choices, and the help of its `Attributes:` documentation.

    Every flag defaults to None, so that only the flags given override a
    `--config` file's keys. `run_default`: the help says a field not given
    is the run's own setting (a `GenerationConfig`'s); `exclude`: fields
    without a flag here.
    """
    from keras_transformer._config_docs import attribute_docs

    docs = attribute_docs(config_cls)
    for field in dataclasses.fields(config_cls):
        if field.metadata.get("flag", True) is False or field.name in exclude:
            continue
        default = field.default
        if field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        flags = ["--" + field.name.replace("_", "-")]
        other = getattr(config_cls, "TF_SERVING_FLAGS", {}).get(field.name)
        if other is not None and "--" + other not in flags:
            flags.append("--" + other)
        help_text = _flag_help(docs.get(field.name, ""), field, default, run_default)
        # The annotation, not the default, gives the type: `int | None` -> int.
        kind = next((t for t in typing.get_args(field.type) if t is not type(None)), field.type)
        choices = field.metadata.get("choices")
        if field.metadata.get("lines_file"):
            extra = dict(type=lines_file, metavar=field.metadata.get("metavar"))
        elif kind is dict:
            extra = dict(type=json_value, metavar="JSON")
            help_text += " JSON text, or a JSON file's path."
        elif kind is list and field.metadata.get("repeatable"):
            extra = dict(action="append", metavar=field.metadata.get("metavar"))
            help_text = help_text.replace("Default: [].", "Default: none.")
        elif kind is list:
            extra = dict(metavar="A,B")
            help_text += " Comma-separated."
        elif kind is bool:
            extra = dict(action=argparse.BooleanOptionalAction)
        else:
            extra = dict(type=int32 if field.metadata.get("int32") else kind, choices=choices,
                         metavar=None if choices else field.name.upper())  # fmt: skip
        # dest is the field's name whatever the flags (TF Serving's spelling among them).
        parser.add_argument(*flags, dest=field.name, default=None, help=help_text, **extra)


def _config_values(args, config_cls):
    """The `--config` file's keys, overridden by the flags given (a
    `GenerationConfig`'s among them where `config_cls` takes them)."""
    from keras_transformer.training import config as config_lib

    values = config_lib.read_config_file(args.config) if args.config else {}
    classes = [config_cls, *getattr(config_cls, "FLAG_GROUPS", ())]
    for field in (f for cls in classes for f in dataclasses.fields(cls)):
        value = getattr(args, field.name, None)
        if value is not None:
            values[field.name] = value
    return values


def _config_parser(sub, command, help_text, config_cls, keys, run_command):
    """A subcommand whose flags are the fields of `config_cls`, plus `--config`."""
    p = sub.add_parser(command, help=help_text)
    p.add_argument(
        "--config",
        help=f"YAML or JSON file of {keys} keys; the flags given override it (default: none)",
    )
    _add_config_flags(p, config_cls)
    for group in getattr(config_cls, "FLAG_GROUPS", ()):
        _add_config_flags(p, group, run_default=True)
    p.set_defaults(run_command=run_command, config_cls=config_cls)


def _options(args):
    """The options object of a command whose flags are a dataclass's,
    checked before Keras loads (its module imports neither Keras nor
    TensorFlow), so that a missing or bad value costs no second."""
    config_cls = getattr(args, "config_cls", None)
    if config_cls is None or not getattr(config_cls, "CHECKED_BEFORE_KERAS", False):
        return None
    return config_cls.from_dict(_config_values(args, config_cls))


def _train_parser(sub):
    from keras_transformer.training.config import TrainConfig

    _config_parser(sub, "train", "train a translation model", TrainConfig, "training", _train)


def _tune_parser(sub):
    from keras_transformer.tuning.config import TuneConfig

    _config_parser(
        sub, "tune", "search hyperparameters with keras-tuner", TuneConfig, "tune", _tune
    )


def _serve_parser(sub):
    from keras_transformer.serving.options import ServerOptions

    _config_parser(
        sub,
        "serve",
        "serve exports over TF Serving's gRPC and REST APIs",
        ServerOptions,
        "serve",
        _serve,
    )


def _import_parser(sub):
    p = sub.add_parser(
        "import", help="make a run of a trained checkpoint of another toolkit (Marian, OPUS-MT)"
    )
    p.add_argument("checkpoint", help="the checkpoint folder (as save_pretrained writes it)")
    p.add_argument(
        "--format",
        choices=["marian"],
        default="marian",
        help="its format: marian, Hugging Face's MarianMTModel (default: marian)",
    )
    p.add_argument("--output-dir", required=True, help="the run directory to write (new)")
    p.set_defaults(run_command=_import)


def _import(args):
    from keras_transformer.interop.marian import describe, import_marian

    print(describe(import_marian(args.checkpoint, args.output_dir)))


def _export_parser(sub):
    from keras_transformer.export.options import ExportOptions

    _config_parser(sub, "export", "write a servable SavedModel version (or a CTranslate2 model)",
                   ExportOptions, "export", _export)  # fmt: skip


def _corpus_parser(sub):
    from keras_transformer.corpus.options import CorpusOptions

    _config_parser(sub, "corpus", "translate, n-best or score text files with an export, "
                   "locally, on a Ray cluster or on Apache Beam, into JSON Lines shards",
                   CorpusOptions, "corpus", _corpus)  # fmt: skip


def _corpus(args):
    from keras_transformer.corpus.job import run_corpus

    summary = run_corpus(args.options)
    for path in summary["shards"]:
        print(path)
    workers = ", ".join(f"{w}: {n}" for w, n in sorted(summary["rows_by_worker"].items()))
    print(f"{summary['records']} records; rows by worker: {workers}", file=sys.stderr)


def _train(args):
    from keras_transformer.training import TrainConfig, train

    values = _config_values(args, TrainConfig)
    if isinstance(values.get("devices"), str):
        values["devices"] = values["devices"].split(",")
    train(TrainConfig.from_dict(values))


def _evaluate(args):
    from keras_transformer.data.sources import read_parallel_files
    from keras_transformer.decoding import GenerationConfig, Translator, evaluate
    from keras_transformer.training import load_run

    settings = {name: getattr(args, name, None) for name in GenerationConfig.field_names()}
    generation = GenerationConfig.for_run(args.run).merged(**settings)
    model, source_tok, target_tok, _ = load_run(args.run, weights=args.weights)
    translator = Translator(model, source_tok, target_tok, generation)
    sources, references, stats = read_parallel_files(args.source, args.reference)
    if stats.empty_dropped:
        print(f"{stats.empty_dropped} pairs with an empty side skipped", file=sys.stderr)
    if not sources:
        raise ValueError(
            f"Nothing to evaluate: every pair of {args.source} and {args.reference} "
            "has an empty side"
        )
    scores, hypotheses = evaluate(translator, sources, references, batch_size=args.batch_size)
    print(scores.describe())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    **scores.as_dict(),
                    "beam_size": generation.beam_size,
                    "run": args.run,
                    "weights": args.weights,
                },
                f,
                indent=2,
            )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hypotheses)


def _average(args):
    from keras_transformer.training import RunDirectory, average_checkpoints

    _, epochs = average_checkpoints(args.run, last=args.last)
    print(
        f"Averaged epochs {', '.join(map(str, epochs))} "
        f"into {RunDirectory(args.run).averaged_weights}"
    )


def _plot(args):
    from keras_transformer.training.plots import plot_run

    for path in plot_run(args.run, args.output_dir):
        print(path)


def _export(args):
    from keras_transformer.export.export_run import export_run

    options = args.options
    path = export_run(options)
    print(path)
    if options.jit_compile:
        _export_info(path)


def _export_info(path):
    """Says on stderr how a `--jit-compile` export runs."""
    from keras_transformer.runtime.export_info import read_export_info

    info = read_export_info(path)
    print(
        f"compiled with XLA: {info['programs']} programs (batches of "
        f"{info['batch_sizes']} run as programs of {info['program_batch_sizes']} rows, "
        f"two at once; lengths {info['lengths']}), all run by the warmup "
        f"records; TF Serving needs {info['tf_serving_flag']}",
        file=sys.stderr,
    )


def _stdin_sentences():
    """The sentences of standard input, a line each, checked as files are:
    a line that is not UTF-8 is named, not a traceback."""
    from keras_transformer.data.sources import read_stream_lines

    return read_stream_lines(sys.stdin.buffer)


def _translate(args):
    from keras_transformer.runtime.local import translate_with_savedmodel

    sentences = args.sentences or _stdin_sentences()
    results = translate_with_savedmodel(
        args.model,
        sentences,
        signature=args.signature,
        version=args.version,
        plot_attention=args.plot_attention,
        batch_size=args.batch_size,
        target_prefix=args.target_prefix,
    )
    for line in results:
        print(line)


def _score(args):
    from keras_transformer.data.sources import read_aligned_lines
    from keras_transformer.runtime.local import score_with_savedmodel

    sources, targets = read_aligned_lines(args.source, args.target)
    log_probs, lengths = score_with_savedmodel(
        args.model, sources, targets, version=args.version, batch_size=args.batch_size
    )
    for log_prob, length in zip(log_probs, lengths):
        print(f"{log_prob / length:.6f}" if args.normalize else f"{log_prob:.6f}")


def _serve(args):
    from keras_transformer.serving.options import ServerOptions
    from keras_transformer.serving.server import serve_forever

    if not serve_forever(ServerOptions.from_dict(_config_values(args, ServerOptions))):
        return
    # Drained and stopped: exit now. Work still stuck in TensorFlow on a
    # daemon thread would abort the interpreter's own shutdown (SIGABRT).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _client(args):
    import grpc

    from keras_transformer.serving.grpc_client import GrpcTranslationClient

    check_positive_int("batch_size", args.batch_size)
    sentences = args.sentences or _stdin_sentences()
    key = "translations" if args.signature == "translate_nbest" else "translation"
    version, label = args.version, args.version_label
    try:
        with GrpcTranslationClient(args.server, args.model, timeout=args.timeout) as client:
            # A request a batch, as a server takes them (its --max-request-rows).
            for begin in range(0, len(sentences), args.batch_size):
                outputs = client.translate(
                    sentences[begin : begin + args.batch_size],
                    signature=args.signature,
                    version=version,
                    version_label=label,
                )
                if version is None and label is None:
                    # The rest from the version that answered the first:
                    # one model for the whole input, whatever loads meanwhile.
                    version = outputs.get("version")
                for row in outputs[key]:
                    print(row if isinstance(row, str) else " ||| ".join(row))
    except grpc.RpcError as error:  # the server's or the channel's status says it all
        details = " ".join(str(error.details()).split())
        raise _Failed(f"{args.server}: {error.code().name}: {details}") from None


def _tune(args):
    from keras_transformer.tuning import TuneConfig
    from keras_transformer.tuning.search import run_search

    run_search(TuneConfig.from_dict(_config_values(args, TuneConfig)))


def _add_weights_flag(p):
    p.add_argument(
        "--weights",
        choices=("auto", "averaged", "best", "final"),
        default="auto",
        help="which weights of the run: auto (the averaged weights if the run has them, "
        "else the best on validation), averaged, best or final (default: %(default)s)",
    )


def _evaluate_parser(sub):
    p = sub.add_parser("evaluate", help="translate a file and report sacreBLEU")
    p.add_argument("--run", required=True, help="the run directory of `train` (required)")
    p.add_argument(
        "--source", required=True, help="text file of source sentences, one a line (required)"
    )
    p.add_argument(
        "--reference",
        required=True,
        help="text file of reference translations, line by line with --source (required)",
    )
    _add_weights_flag(p)
    from keras_transformer.decoding.generation_config import GenerationConfig

    sampling = [n for n in GenerationConfig.field_names() if n.startswith("sampling_")]
    _add_config_flags(p, GenerationConfig, run_default=True, exclude=sampling)
    p.add_argument(
        "--batch-size",
        type=int,
        default=64,
        help="sentences translated together (default: %(default)s)",
    )
    p.add_argument("--json", help="also write the scores here as JSON (default: not written)")
    p.add_argument("--output", help="write the translations here (default: not written)")
    p.set_defaults(run_command=_evaluate)


def _run_parsers(sub):
    """`average` and `plot`, which take a run directory."""
    p = sub.add_parser("average", help="average a run's last epoch weights (checkpoint averaging)")
    p.add_argument("--run", required=True, help="the run directory of `train` (required)")
    p.add_argument(
        "--last",
        type=int,
        default=5,
        help="how many of the newest kept epochs to average (default: %(default)s)",
    )
    p.set_defaults(run_command=_average)

    p = sub.add_parser("plot", help="PNG curves of a run and its learning-rate schedule")
    p.add_argument("--run", required=True, help="the run directory of `train` (required)")
    p.add_argument("--output-dir", help="where the PNG files go (default: the run directory)")
    p.set_defaults(run_command=_plot)


def _add_model_flags(p):
    """The flags of the commands that run an export on this machine."""
    p.add_argument(
        "--model", required=True, help="an export base or one version directory (required)"
    )
    p.add_argument("--version", type=int, help="version under an export base (default: the newest)")


def _score_parser(sub):
    p = sub.add_parser(
        "score", help="log-probability of given translations under an exported model"
    )
    _add_model_flags(p)
    p.add_argument(
        "--source", required=True, help="text file of source sentences, one a line (required)"
    )
    p.add_argument(
        "--target",
        required=True,
        help="text file of their translations, line by line with --source (required)",
    )
    p.add_argument(
        "--normalize",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="divide each log-probability by its token count, end token included "
        "(default: off, the sum)",
    )
    p.add_argument(
        "--batch-size", type=int, default=64, help="pairs scored together (default: %(default)s)"
    )
    p.set_defaults(run_command=_score)


def _translate_parser(sub):
    from keras_transformer.runtime.signatures import SIGNATURE_INPUTS, SIGNATURES

    p = sub.add_parser("translate", help="translate with an exported SavedModel")
    _add_model_flags(p)
    p.add_argument(
        "--signature",
        default="serving_default",
        choices=[s for s in SIGNATURES if SIGNATURE_INPUTS[s] == ("text",)],
        help="the signature to run (`score` has its own command) (default: %(default)s)",
    )
    p.add_argument(
        "--plot-attention",
        help="also write a PNG of the first sentence's cross-attention here (default: none)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=64,
        help="sentences translated together (default: %(default)s)",
    )
    p.add_argument(
        "--target-prefix",
        help="text every translation begins with and continues (interactive translation, "
        "as CTranslate2's target_prefix): with --signature serving_default or "
        "translate_nbest (default: none)",
    )
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: stdin)")
    p.set_defaults(run_command=_translate)


def _client_parser(sub):
    from keras_transformer.runtime.signatures import SIGNATURES

    p = sub.add_parser("client", help="translate through a TF Serving gRPC server")
    p.add_argument(
        "--server",
        default="localhost:8500",
        help="HOST:PORT of the gRPC API (default: %(default)s)",
    )
    p.add_argument(
        "--model", default="translator", help="the served model's name (default: %(default)s)"
    )
    p.add_argument(
        "--signature",
        default="serving_default",
        help=f"the signature to run; ours are {', '.join(SIGNATURES)} (default: %(default)s)",
    )
    version = p.add_mutually_exclusive_group()
    version.add_argument("--version", type=int, help="a version number (default: the server's)")
    version.add_argument(
        "--version-label", help="a version label, e.g. stable (default: the server's)"
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, help="seconds for a request (default: %(default)s)"
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=64,
        help="sentences a request; all from the version that answers the first "
        "(default: %(default)s)",
    )
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: stdin)")
    p.set_defaults(run_command=_client)


def build_parser():
    """The command line: one subcommand per job, in the order of the work."""
    parser = argparse.ArgumentParser(prog="keras-transformer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_import_parser, _train_parser, _evaluate_parser, _run_parsers, _export_parser,
                _score_parser, _translate_parser, _corpus_parser, _serve_parser, _tune_parser,
                _client_parser):  # fmt: skip
        add(sub)
    return parser


def _set_up_process(argv):
    """What the program sets before Keras and TensorFlow load (importing
    `keras_transformer` loads neither): the backend of `--backend` (or
    TensorFlow), and TensorFlow's log level. They also reach the processes
    a command starts (the servability check, the C++ loader, servers).
    When Keras is loaded already (`main` called from Python), its backend
    stays; `train` then says which it got.
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--backend")
    known, _ = pre.parse_known_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "keras" in sys.modules:
        return
    if known.backend:
        os.environ["KERAS_BACKEND"] = known.backend
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _load_keras():
    """Imports Keras (and TensorFlow where installed, which every command but
    the layers' needs) with TensorFlow's start-up records filtered."""
    import importlib.util

    from keras_transformer import _native_logs

    with _native_logs.filtered():
        if importlib.util.find_spec("tensorflow") is not None:
            import tensorflow  # noqa: F401
        import keras  # noqa: F401  (registers the package's classes)


class _Failed(Exception):
    """A command that could not do its work, for a reason its message
    gives whole (a server's status): one line, no traceback."""


def _is_user_error(error):
    """A `ValueError` or `OSError` that the package itself raised about its
    input (a bad value, a missing file, a port in use): one line is the
    whole story. Raised from inside another library, it is a fault."""
    if isinstance(error, ImportError):
        # A missing optional dependency: the message names the install.
        return type(error) is ImportError and "pip install" in str(error)
    if not isinstance(error, (ValueError, OSError)):
        return False
    files, tb = [], error.__traceback__
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    ours = [i for i, name in enumerate(files) if name.startswith(_PACKAGE_DIR)]
    if not ours:
        return False
    if ours[-1] == len(files) - 1:
        return True
    # A path of the user's that the package handed to the standard library
    # (os.makedirs, shutil) and the file system refused: the message names it.
    return getattr(error, "filename", None) is not None and all(
        _in_standard_library(name) for name in files[ours[-1] + 1 :]
    )


def _in_standard_library(filename):
    import sysconfig

    library = sysconfig.get_paths()["stdlib"]
    return filename.startswith("<frozen ") or (
        filename.startswith(library + os.sep) and "site-packages" not in filename
    )


def parse_command_line(argv):
    """The parsed command line; `corpus` keeps the flags it does not know
    for Beam (`--engine beam` takes them, the other engines refuse them)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "corpus":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "corpus":
        args.beam_args = rest or None
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    _set_up_process(argv)
    args = parse_command_line(argv)  # --help and flag errors end here, Keras unloaded
    try:
        args.options = _options(args)
        _load_keras()
        args.run_command(args)
    except (ValueError, OSError, ImportError, _Failed) as error:  # FileNotFoundError included
        if not isinstance(error, _Failed) and not _is_user_error(error):
            traceback.print_exc()
        print(f"keras-transformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if not _is_out_of_memory(error):
            raise
        # What was asked is larger than the machine: no fault to trace.
        # TensorFlow's message goes on with the graph's ops.
        first = str(getattr(error, "message", error)).strip().splitlines()[0]
        print(f"keras-transformer {args.command}: error: out of memory: {first}", file=sys.stderr)
        return 2
    return 0


def _is_out_of_memory(error):
    """NumPy's or Python's `MemoryError`, or TensorFlow's OOM."""
    tf = sys.modules.get("tensorflow")
    oom = getattr(getattr(tf, "errors", None), "ResourceExhaustedError", ())
    return isinstance(error, (MemoryError, oom))


if __name__ == "__main__":
    sys.exit(main())

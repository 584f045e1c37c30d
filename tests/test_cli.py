"""The command line passes its flags through to the library unchanged."""

import dataclasses
import io
import os

import pytest

from keras_transformer import cli
from keras_transformer.serving import grpc_client
from keras_transformer.serving import server as serving_server


def test_serve_passes_the_version_policy_and_labels(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(serving_server, "serve_forever", calls.append)
    argv = ["serve", "--model-base-path", str(tmp_path), "--model-name", "translator",
            "--version-policy", "all", "--version-label", "stable=1",
            "--version-label", "canary=2"]  # fmt: skip
    assert cli.main(argv) == 0
    (options,) = calls
    assert (options.model_base_path, options.model_name) == (str(tmp_path), "translator")
    assert options.version_policy == "all"
    assert options.version_labels == {"stable": 1, "canary": 2}
    assert (options.tensorflow_intra_op_parallelism, options.tensorflow_inter_op_parallelism) == (
        0, 0,
    )  # fmt: skip


def test_serve_takes_tf_serving_s_own_flags(monkeypatch, tmp_path):
    """A `tensorflow_model_server` command line, as TF Serving's documents
    write it, runs unchanged."""
    calls = []
    monkeypatch.setattr(serving_server, "serve_forever", calls.append)
    argv = ["serve", "--port=8600", "--rest_api_port=8601", "--model_name=translator",
            f"--model_base_path={tmp_path}", "--file_system_poll_wait_seconds=3",
            "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=2",
            "--rest_api_num_threads=5", "--rest_api_timeout_in_ms=2000", "--grpc_max_threads=7",
            "--grpc_channel_arguments=grpc.max_concurrent_streams=9"]  # fmt: skip
    assert cli.main(argv) == 0
    (options,) = calls
    assert (options.port, options.rest_api_port, options.poll_seconds) == (8600, 8601, 3.0)
    assert (options.model_name, options.model_base_path) == ("translator", str(tmp_path))
    assert (options.tensorflow_intra_op_parallelism, options.tensorflow_inter_op_parallelism) == (
        1, 2,
    )  # fmt: skip
    assert (options.rest_api_num_threads, options.rest_api_timeout_in_ms) == (5, 2000)
    assert options.grpc_max_threads == 7
    assert options.grpc_channel_arguments == "grpc.max_concurrent_streams=9"
    from keras_transformer.serving.options import ServerOptions

    fields = {f.name for f in dataclasses.fields(ServerOptions)}
    assert set(ServerOptions.TF_SERVING_FLAGS) <= fields


@pytest.mark.parametrize("name, served", [(None, "default"), ("", None), ("m", "m")])
def test_serve_names_the_model_as_tf_serving(monkeypatch, tmp_path, capsys, name, served):
    """`--model_name` is TF Serving's `default` unless given; empty, no
    request could name the model."""
    from keras_transformer.serving import server

    seen = []
    monkeypatch.setattr(server, "_one_model", lambda base, model, *rest: seen.append(model))

    def serve_forever(options):
        server._entries(options)
        return None  # not started: `serve` returns (a drained server exits the process)

    monkeypatch.setattr(serving_server, "serve_forever", serve_forever)
    argv = ["serve", f"--model_base_path={tmp_path}"]
    argv += [] if name is None else [f"--model_name={name}"]
    if served is None:
        assert cli.main(argv) == 2
        line, _ = _one_error_line(capsys, "serve")
        assert line.endswith("--model-name must not be empty: requests name the model")
    else:
        assert cli.main(argv) == 0 and seen == [served]


def test_serve_passes_the_thread_pools_and_limits(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(serving_server, "serve_forever", calls.append)
    argv = ["serve", "--model-base-path", str(tmp_path), "--model-name", "translator"]
    flags = ["--tensorflow-intra-op-parallelism", "1", "--tensorflow-inter-op-parallelism", "2",
             "--grpc-max-threads", "3", "--rest-api-num-threads", "4",
             "--rest-api-timeout-in-ms", "500", "--no-split-large-requests",
             "--no-enable-model-warmup"]  # fmt: skip
    assert cli.main(argv + flags) == 0
    options = calls[0]
    assert (options.tensorflow_intra_op_parallelism, options.tensorflow_inter_op_parallelism) == (
        1, 2,
    )  # fmt: skip
    assert (options.predict_threads, options.rest_threads, options.rest_timeout_seconds) == (
        3, 4, 0.5,
    )  # fmt: skip
    assert options.batching["split"] is False and options.enable_model_warmup is False


def test_serve_reads_a_config_file_that_flags_override(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(serving_server, "serve_forever", calls.append)
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"model_base_path: {tmp_path}\nmodel_name: translator\nport: 9000\n"
        "version_label: [stable=3]\nmax_batch_size: 8\n"
    )
    assert cli.main(["serve", "--config", str(config), "--port", "9001"]) == 0
    options = calls[0]
    assert (options.port, options.max_batch_size, options.version_labels) == (
        9001, 8, {"stable": 3},
    )  # fmt: skip


def test_serve_names_an_unknown_config_key(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(serving_server, "serve_forever", lambda options: pytest.fail("served"))
    config = tmp_path / "serve.yaml"
    config.write_text("max_rows: 3\n")
    assert cli.main(["serve", "--config", str(config)]) == 2
    assert "max_rows" in capsys.readouterr().err


@pytest.mark.parametrize(
    "value,message", [("x", "invalid int32 value: 'x'"), (str(2**31), "32-bit integer range")]
)
def test_serve_names_a_bad_thread_count(monkeypatch, tmp_path, capsys, value, message):
    monkeypatch.setattr(serving_server, "serve_forever", lambda *a, **kw: pytest.fail("served"))
    argv = ["serve", "--model-base-path", str(tmp_path), "--model-name", "translator"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv + ["--tensorflow-intra-op-parallelism", value])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--tensorflow-intra-op-parallelism" in last and message in last


def test_serve_refuses_a_bad_label_by_name(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(serving_server, "serve_forever", lambda options: pytest.fail("served"))
    argv = ["serve", "--model-base-path", str(tmp_path), "--model-name", "translator",
            "--version-label", "stable"]  # fmt: skip
    assert cli.main(argv) == 2
    assert "LABEL=VERSION" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "corpus"])
def test_an_xla_cache_it_cannot_write_is_named_in_one_line(command, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    cache = tmp_path / "file" / "cache"
    if command == "serve":
        argv = ["serve", "--model-base-path", str(tmp_path), "--model-name", "translator",
                "--port", "0"]  # fmt: skip
    else:
        argv = ["corpus", "--model", str(tmp_path), "--input", str(tmp_path / "file"),
                "--output", str(tmp_path / "out")]  # fmt: skip
    assert cli.main([*argv, "--xla-cache-dir", str(cache)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"XLA cache directory {cache} cannot be written" in err[0]


@pytest.mark.parametrize(
    "command",
    ["export", "export-huggingface", "export-ctranslate2", "train", "translate-plot"],
)
def test_an_output_path_through_a_file_is_named_in_one_line(command, request, tmp_path, capsys,
                                                          monkeypatch):  # fmt: skip
    """The file system's refusal of a path the user gave is the user's error,
    wherever the package hands the path on (os.makedirs, matplotlib); the
    corpus job's own check: tests/corpus/test_job.py."""
    (tmp_path / "file").write_text("x\n")
    out = str(tmp_path / "file" / "out")
    if command.startswith("export"):
        run = request.getfixturevalue("trained_run")["run"]
        argv = ["export", "--run", run, "--export-base", out]
        argv += ["--format", command.split("-")[1]] if "-" in command else []
        if command == "export-ctranslate2":
            pytest.importorskip("ctranslate2")
    elif command == "train":
        argv = ["train", "--dataset", "synthetic", "--output-dir", out, "--epochs", "1"]
    else:
        base = request.getfixturevalue("export_base")
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"The dog sleeps.\n")))
        argv = ["translate", "--model", base, "--plot-attention", out + ".png"]
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith(("E0000", "W0000"))]  # TensorFlow's own records  # fmt: skip
    assert not any("Traceback" in line for line in err), err
    assert err[-1].startswith(f"keras-transformer {argv[0]}: error:"), err
    assert str(tmp_path / "file") in err[-1], err
    assert not any(name.startswith("out") for name in os.listdir(tmp_path)), os.listdir(tmp_path)


def _one_error_line(capsys, command):
    """The last line on stderr, which must be the command's one-line error,
    and what stdout got."""
    captured = capsys.readouterr()
    err = [line for line in captured.err.strip().splitlines()
           if not line.startswith(("E0000", "W0000"))]  # TensorFlow's own records  # fmt: skip
    assert not any("Traceback" in line for line in err), err
    assert err[-1].startswith(f"keras-transformer {command}: error: "), err
    return err[-1], captured.out


@pytest.mark.parametrize("command", ["translate", "client"])
def test_standard_input_that_is_not_utf8_is_named_in_one_line(command, request, monkeypatch,
                                                              capsys):  # fmt: skip
    stdin = io.TextIOWrapper(io.BytesIO("A dog.\nGr\xfc\xdfe\n".encode("latin-1")))
    monkeypatch.setattr("sys.stdin", stdin)
    if command == "translate":
        argv = ["translate", "--model", request.getfixturevalue("export_base")]
    else:
        monkeypatch.setattr(grpc_client, "GrpcTranslationClient", _Client)
        argv = ["client"]
    assert cli.main(argv) == 2
    line, _ = _one_error_line(capsys, command)
    assert line.endswith("standard input: line 2 is not UTF-8 (byte 0xfc at offset 9)"), line


def test_standard_input_is_read_as_files_are(monkeypatch, capsys):
    # A byte order mark and Windows line ends are no part of a sentence;
    # a blank line stays a line (its translation, an empty line).
    stdin = io.TextIOWrapper(io.BytesIO("\ufeffOne dog.\r\n\nTwo\u2028dogs.\n".encode("utf-8")))
    monkeypatch.setattr("sys.stdin", stdin)
    monkeypatch.setattr(grpc_client, "GrpcTranslationClient", _Client)
    assert cli.main(["client"]) == 0
    assert capsys.readouterr().out == "ONE DOG.\n\nTWO\u2028DOGS.\n"


@pytest.mark.parametrize(
    "batch_size, uneven, message",
    [
        ("0", False, "`batch_size` must be a positive int. Received: batch_size=0"),
        ("-3", False, "`batch_size` must be a positive int. Received: batch_size=-3"),
        ("64", True, "{source} has 2, {target} has 1"),
    ],
)
@pytest.mark.parametrize("command", ["score", "evaluate"])
def test_score_and_evaluate_name_a_bad_batch_size_or_uneven_files(
    command, batch_size, uneven, message, request, tmp_path, capsys
):
    source, target = tmp_path / "two.en", tmp_path / "two.de"
    source.write_text("A dog.\nA cat.\n", encoding="utf-8")
    target.write_text("Ein Hund.\n" if uneven else "Ein Hund.\nEine Katze.\n", encoding="utf-8")
    if command == "score":
        argv = ["score", "--model", request.getfixturevalue("export_base"), "--target"]
    else:
        argv = ["evaluate", "--run", request.getfixturevalue("trained_run")["run"], "--reference"]
    argv += [str(target), "--source", str(source), "--batch-size", batch_size]
    assert cli.main(argv) == 2
    line, out = _one_error_line(capsys, command)
    assert out == ""  # no score printed before the error, none lost silently
    assert line.endswith(message.format(source=source, target=target)), line


def test_evaluate_with_no_pair_left_is_one_line(trained_run, tmp_path, capsys):
    source, reference = tmp_path / "a.en", tmp_path / "a.de"
    source.write_text("A dog.\n\n", encoding="utf-8")
    reference.write_text("\nEine Katze.\n", encoding="utf-8")
    argv = ["evaluate", "--run", trained_run["run"], "--source", str(source)]
    assert cli.main([*argv, "--reference", str(reference)]) == 2
    line, _ = _one_error_line(capsys, "evaluate")
    assert line.endswith(
        f"Nothing to evaluate: every pair of {source} and {reference} has an empty side"
    )


@pytest.mark.parametrize("kind", ["numpy", "tensorflow"])
def test_out_of_memory_is_one_line(kind, monkeypatch, capsys):
    import numpy as np
    import tensorflow as tf

    def run(args):
        if kind == "numpy":
            np.ones((1 << 20, 1 << 20, 64))  # 512 TiB
        raise tf.errors.ResourceExhaustedError(
            None, None, "OOM when allocating tensor with shape[400000,64,32]\n\t [[{{node x}}]]"
        )

    monkeypatch.setattr(cli, "_translate", run)  # the parser takes it when main builds it
    monkeypatch.setattr(cli, "_load_keras", lambda: None)
    assert cli.main(["translate", "--model", "m", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("keras-transformer translate: error: out of memory: ")
    expected = "Unable to allocate" if kind == "numpy" else "shape[400000,64,32]"
    assert expected in err[0] and err[0].endswith(("float64", "shape[400000,64,32]"))


@pytest.mark.parametrize(
    "value, expected",
    [
        ('{"d_model": [64, 128]}', {"d_model": [64, 128]}),
        ("FILE", {"num_layers": [1, 2]}),
        ('{"d_model": 64', "is neither JSON (Expecting ',' delimiter"),
        ("BAD_FILE", "is not a JSON file: Expecting property name"),
        ("/nonexistent.json", "'/nonexistent.json' is neither JSON"),
    ],
)
def test_a_dict_flag_takes_json_or_a_json_file(tmp_path, capsys, value, expected):
    (tmp_path / "space.json").write_text('{"num_layers": [1, 2]}', encoding="utf-8")
    (tmp_path / "bad.json").write_text("{bad", encoding="utf-8")
    value = value.replace("BAD_FILE", str(tmp_path / "bad.json"))
    value = value.replace("FILE", str(tmp_path / "space.json"))
    argv = ["tune", "--dataset", "synthetic", "--space", value]
    if isinstance(expected, dict):
        assert cli.parse_command_line(argv).space == expected
        return
    with pytest.raises(SystemExit):
        cli.parse_command_line(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("keras-transformer tune: error: argument --space: ") and expected in last


def test_model_overrides_that_are_not_an_object_are_one_line(capsys):
    argv = ["train", "--dataset", "synthetic", "--model-overrides", "[1, 2]"]
    assert cli.main(argv) == 2
    line, _ = _one_error_line(capsys, "train")
    assert line.endswith("must be a JSON object of Transformer arguments. "
                         "Received: model_overrides=[1, 2]")  # fmt: skip


class _Client:
    calls = []

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def translate(self, sentences, **kwargs):
        self.calls.append(kwargs)
        return {"translation": [s.upper() for s in sentences], "version": 7}


@pytest.mark.parametrize(
    "flags,version,label",
    [
        ([], None, None),
        (["--version", "3"], 3, None),
        (["--version-label", "canary"], None, "canary"),
    ],
)
def test_client_names_a_version_or_a_label(monkeypatch, capsys, flags, version, label):
    monkeypatch.setattr(grpc_client, "GrpcTranslationClient", _Client)
    _Client.calls.clear()
    assert cli.main(["client", *flags, "Guten Tag"]) == 0
    assert capsys.readouterr().out == "GUTEN TAG\n"
    assert _Client.calls == [
        {"signature": "serving_default", "version": version, "version_label": label}
    ]


@pytest.mark.parametrize("flags, pinned", [([], 7), (["--version-label", "canary"], None)])
def test_client_sends_a_request_a_batch_all_to_one_version(monkeypatch, capsys, flags, pinned):
    monkeypatch.setattr(grpc_client, "GrpcTranslationClient", _Client)
    _Client.calls.clear()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a\nb\n\nd\ne\n")))
    assert cli.main(["client", "--batch-size", "2", *flags]) == 0
    assert capsys.readouterr().out == "A\nB\n\nD\nE\n"
    # The version that answered the first request answers the rest, unless a
    # version or a label was asked for.
    assert [call["version"] for call in _Client.calls] == [None, pinned, pinned]
    assert cli.main(["client", "--batch-size", "0", "x"]) == 2


def test_client_refuses_a_version_and_a_label():
    with pytest.raises(SystemExit):
        cli.main(["client", "--version", "1", "--version-label", "stable", "x"])


@pytest.mark.parametrize("answer", ["unreachable", "NOT_FOUND"])
def test_a_failed_client_call_is_one_line(answer, capsys):
    """The server's status (or the channel's) is the whole story of a failed
    call: named with the address, on one line, never a traceback."""
    from concurrent import futures

    import grpc

    server = None
    address = "127.0.0.2:1"  # nothing listens there
    if answer != "unreachable":

        def refuse(request, context):
            context.abort(grpc.StatusCode.NOT_FOUND, "Servable not found\nfor request: x")

        server = grpc.server(futures.ThreadPoolExecutor(1))
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "tensorflow.serving.PredictionService",
            {"Predict": grpc.unary_unary_rpc_method_handler(refuse)})])  # fmt: skip
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        server.start()
    try:
        assert cli.main(["client", "--server", address, "--timeout", "10", "Guten Tag"]) == 2
    finally:
        if server is not None:
            server.stop(None)
    err = capsys.readouterr().err.strip().splitlines()
    expected = "UNAVAILABLE" if answer == "unreachable" else "NOT_FOUND: Servable not found for"
    assert len(err) == 1 and err[0].startswith(f"keras-transformer client: error: {address}: ")
    assert expected in err[0], err


def _subparsers():
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sub.choices


@pytest.mark.parametrize(
    "command",
    [
        "train",
        "evaluate",
        "average",
        "plot",
        "export",
        "translate",
        "score",
        "corpus",
        "serve",
        "tune",
        "client",
    ],
)
def test_every_flag_says_what_it_does_its_choices_and_default(command):
    parser = _subparsers()[command]
    for action in parser._actions:
        if action.dest in ("help",):
            continue
        help_text = action.help or ""
        name = action.option_strings[0] if action.option_strings else action.dest
        assert len(help_text) > 15, f"{command} {name} has no help"
        assert "default" in help_text.lower() or "required" in help_text.lower(), (
            f"{command} {name}: {help_text!r} names no default"
        )
        for choice in action.choices or ():
            assert str(choice) in help_text or action.metavar is None, (command, name, choice)


@pytest.mark.parametrize(
    "command, module, name",
    [
        ("train", "training.config", "TrainConfig"),
        ("tune", "tuning.config", "TuneConfig"),
        ("export", "export.options", "ExportOptions"),
        ("serve", "serving.options", "ServerOptions"),
        ("corpus", "corpus.options", "CorpusOptions"),
    ],
)
def test_config_flags_are_the_config_fields_with_their_documentation(command, module, name):
    import dataclasses
    import importlib

    from keras_transformer._config_docs import attribute_docs

    config_cls = getattr(importlib.import_module(f"keras_transformer.{module}"), name)
    docs = attribute_docs(config_cls)
    actions = {a.dest: a for a in _subparsers()[command]._actions}
    for field in dataclasses.fields(config_cls):
        if field.metadata.get("flag", True) is False:  # no flag: e.g. Beam's own flags
            assert field.name not in actions
            continue
        assert actions[field.name].help.startswith(docs[field.name].rstrip(".")), field.name
        for choice in field.metadata.get("choices", ()):
            assert str(choice) in actions[field.name].help


def test_tune_flags_override_a_config_file(monkeypatch, tmp_path):
    from keras_transformer.tuning import search

    calls = []
    monkeypatch.setattr(search, "run_search", calls.append)
    config = tmp_path / "tune.yaml"
    config.write_text("dataset: synthetic\ndirectory: out\nmax-trials: 3\nepochs: 4\n")
    assert cli.main(["tune", "--config", str(config), "--epochs", "1", "--no-train-best"]) == 0
    (tune_config,) = calls
    assert (tune_config.max_trials, tune_config.epochs, tune_config.train_best) == (3, 1, False)


def test_tune_without_its_required_keys_is_one_line(capsys):
    assert cli.main(["tune", "--dataset", "synthetic"]) == 2
    assert capsys.readouterr().err.strip() == (
        "keras-transformer tune: error: Missing tune config keys: ['directory']"
    )


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--quantization", "int8"], "--quantization int8: --format savedmodel takes none"),
        (
            ["--format", "ctranslate2", "--jit-compile"],
            "--jit-compile does not apply to --format ctranslate2",
        ),
        (["--batch-sizes", "1,0"], "expected positive ints"),
        (["--batch-sizes", "8"], "are the shapes of `jit_compile=True` (--jit-compile) only"),
        (["--beam-size", "0"], "`beam_size` must be a positive int"),
        (["--suppress-sequences", "{missing}"], "missing.txt: No such file or directory"),
        (["--suppress-sequences", "{latin1}"], "latin1.txt: line 2 is not UTF-8 (byte 0xe4)"),
        (["--format", "ctranslate2", "--disable-unk"], "--disable-unk: --format ctranslate2"),
    ],
)
def test_export_names_flags_that_do_not_go_together(tmp_path, capsys, flags, message):
    (tmp_path / "latin1.txt").write_bytes(b"Haus\nK\xe4se\n")
    files = {"missing": tmp_path / "missing.txt", "latin1": tmp_path / "latin1.txt"}
    flags = [flag.format(**files) for flag in flags]
    args = ["export", "--run", str(tmp_path / "run"), "--export-base", str(tmp_path / "out")]
    try:
        code = cli.main([*args, *flags])
    except SystemExit as exit:  # argparse's own refusal
        code = exit.code
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert message in error[-1], error  # argparse's usage may come before it
    assert not any("Traceback" in line for line in error)


def test_export_takes_a_config_file_that_its_flags_override(monkeypatch, tmp_path):
    import importlib

    # The module, not the package's function of the same name.
    module = importlib.import_module("keras_transformer.export.export_run")
    calls = []
    monkeypatch.setattr(module, "export_run", lambda options: calls.append(options) or "p")
    config = tmp_path / "export.yaml"
    config.write_text("run: r\nexport-base: b\nbeam-size: 6\njit-compile: true\n"
                      "batch-sizes: [1, 4]\nmax_output_length: 40\n")  # fmt: skip
    monkeypatch.setattr(cli, "_export_info", lambda path: None)
    assert cli.main(["export", "--config", str(config), "--beam-size", "2"]) == 0
    (options,) = calls
    assert (options.run, options.export_base, options.jit_compile) == ("r", "b", True)
    assert options.generation == {"beam_size": 2, "max_output_length": 40}
    assert options.batch_sizes == [1, 4]
    assert cli.main(["export", "--run", "r", "--export-base", "b", "--max-output-length", "9"]) == 0
    assert calls[-1].generation == {"max_output_length": 9}
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("das Haus\n\n  sehr gut \n", encoding="utf-8")
    argv = ["export", "--run", "r", "--export-base", "b", "--suppress-sequences", str(phrases),
            "--disable-unk"]  # fmt: skip
    assert cli.main(argv) == 0
    assert calls[-1].generation == {"suppress_sequences": ["das Haus", "sehr gut"],
                                    "disable_unk": True}  # fmt: skip

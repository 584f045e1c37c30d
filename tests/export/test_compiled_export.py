"""The `--jit-compile` export: XLA programs of known shapes, all warmed up,
with the plain export's outputs, in TensorFlow's Python and C++ loaders."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_transformer.export import NotServableError, check_servable, export_run
from keras_transformer.runtime.export_info import INFO_PATH, XLA_FLAG, read_export_info
from tests.export.exported import BEAM_SIZE, MAX_LENGTH, SAMPLING

BATCH_SIZES = (1, 4)
LENGTHS = (16,)


@pytest.fixture(scope="module")
def compiled_dir(trained_run, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("compiled") / "translator")
    return export_run(
        trained_run["run"], base, max_output_length=MAX_LENGTH, beam_size=BEAM_SIZE,
        jit_compile=True, batch_sizes=BATCH_SIZES, lengths=LENGTHS, **SAMPLING,
    )  # fmt: skip


def test_the_export_lists_its_programs_and_the_flag_it_needs(compiled_dir):
    info = read_export_info(compiled_dir)
    # Inputs reach 256 tokens (the default): lengths 16 and 256; five
    # compiled searches (beam, greedy, sampling, scoring, prefix) per shape.
    assert info["batch_sizes"] == [1, 4] and info["lengths"] == [16, 256]
    assert info["program_batch_sizes"] == [1, 2]  # a batch of 4 runs as two of 2
    assert info["split_batches"] is True
    assert info["programs"] == 5 * 2 * 2
    assert info["tf_serving_flag"] == XLA_FLAG
    check_servable(compiled_dir)


def test_xla_is_refused_where_the_export_does_not_say_it_needs_it(compiled_dir, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(compiled_dir, copy)
    os.remove(os.path.join(copy, INFO_PATH))
    with pytest.raises(NotServableError, match="--jit-compile"):
        check_servable(copy)


def test_shapes_without_jit_compile_are_refused(trained_run, tmp_path):
    with pytest.raises(ValueError, match="jit_compile"):
        export_run(trained_run["run"], str(tmp_path / "x"), batch_sizes=[1, 2], check=False)


# Run as TF Serving runs a version: load, replay the warmup records, then
# serve; XLA logs each compilation (TF_CPP_VMODULE=device_compiler=1). The
# XLA cache is on, empty: every program compiles and is stored.
_SERVE_AS_TF_SERVING = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    from keras_transformer.runtime import SessionModel
    from keras_transformer.runtime.warmup_records import read_warmup_requests
    from keras_transformer.runtime import xla_cache

    compiled_dir, plain_dir, cache = sys.argv[1:4]
    xla_cache.enable(cache)
    compiled, plain = SessionModel(compiled_dir), SessionModel(plain_dir)
    for request in read_warmup_requests(compiled_dir):
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        compiled.run(request.model_spec.signature_name, inputs)
    print("AVAILABLE", file=sys.stderr, flush=True)
    words = "the dog sleeps a young woman reads the book because children laugh".split()
    rng = np.random.default_rng(0)
    report = {}
    for rows in (1, 3, 6, 0):
        text = np.array([" ".join(rng.choice(words, rng.integers(0, 30))).encode()
                         for _ in range(rows)], dtype=object)
        for signature in ("serving_default", "translate_nbest", "translate_greedy",
                          "attention", "translate_sample", "score"):
            inputs = {"text": text}
            if signature == "score":
                inputs["translation"] = text[::-1]
            want, got = plain.run(signature, inputs), compiled.run(signature, inputs)
            for name in want:
                key = f"{signature}/{name}/{rows}"
                if want[name].dtype == object:
                    report[key] = bool((want[name] == got[name]).all())
                else:
                    # Relative past 1: a whole long translation's log-probability
                    # (hundreds of nats) holds float32's ulp of 1e-4 at 1024.
                    error = np.abs(want[name] - got[name]) / np.maximum(1, np.abs(want[name]))
                    report[key] = float(np.max(error, initial=0))
    print(json.dumps({"entries": xla_cache.entries(), "report": report}))
""")


@pytest.fixture(scope="module")
def served_as_tf_serving(compiled_dir, export_base, tmp_path_factory):
    """`(result, cache)`: the run of `_SERVE_AS_TF_SERVING`, and the XLA
    cache it filled."""
    cache = str(tmp_path_factory.mktemp("xla_cache"))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "device_compiler=1",
           "PYTHONPATH": os.getcwd()}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_AS_TF_SERVING, compiled_dir, os.path.join(export_base, "1"),
         cache],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result, cache


def test_warmup_compiles_every_program_and_serving_compiles_none(
    served_as_tf_serving, compiled_dir
):
    result, _ = served_as_tf_serving
    programs = read_export_info(compiled_dir)["programs"]
    before, _, after = result.stderr.partition("AVAILABLE")
    assert before.count("Compilation of XLA executable") == programs
    assert after.count("Compilation of XLA executable") == 0, after[-2000:]
    run = json.loads(result.stdout.strip().splitlines()[-1])
    assert run["entries"] == programs  # each compiled program was stored
    report = run["report"]
    for key, value in report.items():
        if isinstance(value, bool):
            assert value, key  # translations, pieces: identical
        else:
            assert value <= 1e-4, key  # scores, log-probabilities, weights (relative past 1)


def test_the_cpp_loader_runs_the_compiled_functions(compiled_dir, export_base):
    from keras_transformer.runtime import SessionModel
    from tests import cc_loader

    try:
        binary = cc_loader.build()
    except cc_loader.CcLoaderUnavailable as error:
        pytest.skip(f"TensorFlow's C++ loader cannot be built here: {error}")
    sentences = ["The dog sleeps.", "", "A young woman reads the book because the children laugh."]
    log = []
    outputs, _ = cc_loader.run(binary, compiled_dir, "serving_default", sentences, log=log)
    assert any("Compilation of XLA executable" in line for line in log)
    session = SessionModel(os.path.join(export_base, "1"))
    want = session.run("serving_default", {"text": np.array(sentences, dtype=object)})
    session.close()
    np.testing.assert_array_equal(outputs["translation"], want["translation"])
    np.testing.assert_allclose(outputs["score"], want["score"], atol=1e-4)


def test_keras_transformer_serve_warms_it_up_from_the_xla_cache_and_serves_it(
    served_as_tf_serving, compiled_dir, export_base
):
    from keras_transformer.runtime import SessionModel
    from keras_transformer.serving.grpc_client import GrpcTranslationClient
    from tests.processes import start_serve

    sentences = ["The dog sleeps.", "A young woman reads the book because the children laugh."]
    session = SessionModel(os.path.join(export_base, "1"))
    want = session.run("serving_default", {"text": np.array(sentences, dtype=object)})
    session.close()
    programs = read_export_info(compiled_dir)["programs"]
    _, cache = served_as_tf_serving  # what a first server compiled and stored
    # READY comes once the version is AVAILABLE: after its warmup replay,
    # which reads every program back, as a restarted server does.
    server, port = start_serve(os.path.dirname(compiled_dir), "--xla-cache-dir", cache)
    try:
        with GrpcTranslationClient(f"127.0.0.1:{port}", "translator", timeout=120) as client:
            got = client.translate(sentences)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert f"0 of its {programs} XLA programs compiled" in server.startup_output
    assert got["translation"] == [t.decode("utf-8") for t in want["translation"]]
    np.testing.assert_allclose(got["score"], want["score"], atol=1e-4)


def test_a_corpus_job_keeps_its_programs_in_the_xla_cache_and_reads_them_back(
    compiled_dir, export_base, tmp_path
):
    from keras_transformer.corpus.records import read_shards
    from keras_transformer.runtime.local import translate_with_savedmodel

    sentences = ["The dog sleeps.", "", "A young woman reads the book because the children laugh."]
    (tmp_path / "in.en").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"

    def run(output):
        result = subprocess.run(
            [sys.executable, "-m", "keras_transformer.cli", "corpus", "--model", compiled_dir,
             "--input", str(tmp_path / "in.en"), "--output", str(tmp_path / output),
             "--xla-cache-dir", str(cache)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert [r["translation"] for r in read_shards(str(tmp_path / output))] == want
        return {entry.name: entry.stat().st_mtime_ns for entry in cache.iterdir()}

    want = translate_with_savedmodel(export_base, sentences)
    compiled = run("first")
    assert compiled  # the job's programs, stored as it compiled them
    assert run("second") == compiled  # read back: none compiled and stored again

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import Translator
from keras_transformer.export import (SIGNATURES, NotServableError, check_servable, export_run,
                                      export_version, versions)
from keras_transformer.training import load_run

SENTENCES = ["The dog sleeps.", "A tired man gives the book to the happy women because the cats run.",
             "", "The old teachers see a red ball in the garden."]
MAX_LENGTH = 24


@pytest.fixture(scope="module")
def export_base(trained_run, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("exports") / "translator")
    export_run(trained_run["run"], base, max_length=MAX_LENGTH, beam_size=3)
    return base


def test_versions_are_numbered_and_never_overwritten(trained_run, export_base):
    assert versions(export_base) == [1]
    model, src, tgt, _ = load_run(trained_run["run"])
    path = export_version(model, src, tgt, export_base, max_length=MAX_LENGTH, check=False)
    assert path.endswith(os.sep + "2") and versions(export_base) == [1, 2]
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_version(model, src, tgt, export_base, version=1, max_length=MAX_LENGTH)
    assert not [d for d in os.listdir(export_base) if d.startswith(".staging")]
    shutil.rmtree(path)


LOAD_AS_TF_SERVING = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # TF Serving links these ops; nothing else is imported
    def plain(v):
        if v.dtype == object:
            return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v).tolist()
        return v.tolist()
    path, sentences = sys.argv[1], json.loads(sys.argv[2])
    out = {}
    with tf.compat.v1.Session(graph=tf.Graph()) as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
        for name in ["serving_default", "translate_nbest", "translate_greedy"]:
            sig = meta.signature_def[name]
            feeds = {sig.inputs["text"].name: [s.encode() for s in sentences]}
            fetches = {k: v.name for k, v in sig.outputs.items()}
            values = sess.run(fetches, feeds)
            out[name] = {"method": sig.method_name,
                         "outputs": {k: plain(v) for k, v in values.items()}}
    assert "keras_transformer" not in sys.modules
    print("RESULT " + json.dumps(out))
""")


def test_tf_serving_loader_matches_in_process_translator(trained_run, export_base):
    version_dir = os.path.join(export_base, "1")
    result = subprocess.run([sys.executable, "-c", LOAD_AS_TF_SERVING, version_dir, json.dumps(SENTENCES)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads([l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])

    model, src, tgt, _ = load_run(trained_run["run"])
    translator = Translator(model, src, tgt, beam_size=3, max_output_length=MAX_LENGTH)
    text = tf.constant(SENTENCES)
    expected = {
        "serving_default": translator.translate(text),
        "translate_nbest": translator.translate_nbest(text),
        "translate_greedy": translator.translate_greedy(text),
    }
    for name in ("serving_default", "translate_nbest", "translate_greedy"):
        assert loaded[name]["method"] == "tensorflow/serving/predict"
        outputs = loaded[name]["outputs"]
        for key, value in outputs.items():
            want = expected[name][key].numpy()
            if want.dtype == object:
                decoded = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(want).tolist()
                assert value == decoded, (name, key)
            else:
                np.testing.assert_allclose(value, want, atol=1e-4)
    assert set(loaded["serving_default"]["outputs"]) == {"translation", "score"}
    assert set(loaded["translate_nbest"]["outputs"]) == {"translations", "scores"}
    assert np.array(loaded["translate_nbest"]["outputs"]["translations"]).shape == (4, 3)
    assert loaded["serving_default"]["outputs"]["translation"][2] == ""  # empty in, empty out


def test_attention_signature(export_base):
    from keras_transformer.export import SessionModel

    model = SessionModel(os.path.join(export_base, "1"))
    assert set(model.signatures) == set(SIGNATURES)
    out = model.run("attention", {"text": np.array([b"The dog sleeps.", b"A cat runs."], dtype=object)})
    batch, t, s = out["weights"].shape
    assert out["source_tokens"].shape == (batch, s) and out["target_tokens"].shape == (batch, t)
    real_rows = out["target_tokens"] != b"<pad>"
    np.testing.assert_allclose(out["weights"].sum(-1)[real_rows], 1.0, atol=1e-4)
    model.close()


def test_graph_is_servable_without_xla(export_base):
    ops = check_servable(os.path.join(export_base, "1"))
    assert "SentencepieceOp" in ops and ("While" in ops or "StatelessWhile" in ops)
    assert not any(op.startswith("Xla") for op in ops)


def test_unknown_op_is_named(export_base, tmp_path):
    from tensorflow.core.protobuf import saved_model_pb2

    broken = str(tmp_path / "broken")
    shutil.copytree(os.path.join(export_base, "1"), broken)
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(broken, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    proto.meta_graphs[0].graph_def.library.function[0].node_def[0].op = "FancyCustomOp"
    with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
        f.write(proto.SerializeToString())
    with pytest.raises(NotServableError, match="FancyCustomOp"):
        check_servable(broken)


def test_xla_functions_are_refused(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: x * 2, jit_compile=True, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "xla"))
    with pytest.raises(NotServableError, match="XLA"):
        check_servable(str(tmp_path / "xla"))

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer._version_folders import versions
from keras_transformer.decoding import Translator
from keras_transformer.export import export_version
from tests.export.exported import BEAM_SIZE, MAX_LENGTH

SENTENCES = [
    "The dog sleeps.",
    "A tired man gives the book to the happy women because the cats run.",
    "",
    "The old teachers see a red ball in the garden.",
]


def test_versions_are_numbered_and_never_overwritten(trained_model, export_base, tmp_path):
    base = str(tmp_path / "translator")  # the shared base stays as it is
    shutil.copytree(os.path.join(export_base, "1"), os.path.join(base, "1"))
    assert versions(base) == [1]
    model, src, tgt = trained_model
    path = export_version(model, src, tgt, base, max_output_length=MAX_LENGTH, check=False)
    assert path.endswith(os.sep + "2") and versions(base) == [1, 2]
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_version(model, src, tgt, base, version=1, max_output_length=MAX_LENGTH)
    assert not [d for d in os.listdir(base) if d.startswith(".staging")]


@pytest.mark.parametrize("largest", [True, False])
def test_a_version_past_tf_serving_s_int64_is_refused(tmp_path, largest):
    from keras_transformer._version_folders import write_version

    base = str(tmp_path / "translator")
    os.makedirs(os.path.join(base, str(2**63 - 1)))
    written = []
    if largest:  # the next version would be 2**63
        with pytest.raises(ValueError, match=f"holds version {2**63 - 1}, the last TF Serving"):
            write_version(base, None, written.append)
    else:
        with pytest.raises(ValueError, match="at most 2"):
            write_version(base, 2**63, written.append)
    assert written == [] and sorted(os.listdir(base)) == [str(2**63 - 1)]
    assert write_version(base, 7, lambda folder: os.makedirs(folder)).endswith(os.sep + "7")


def test_the_position_tables_are_stored_once(trained_model, export_base):
    # Dozens of traced functions read positions known only at run time;
    # each once embedded its own copy of the sinusoidal table.
    from tensorflow.core.protobuf import saved_model_pb2

    model, _, _ = trained_model
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export_base, "1", "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    table = [model.max_length, model.d_model]

    def tables(nodes):
        return sum(
            n.op == "Const" and [d.size for d in n.attr["value"].tensor.tensor_shape.dim] == table
            for n in nodes
        )

    assert len(graph.library.function) > 10
    assert sum(tables(f.node_def) for f in graph.library.function) == 0
    embeddings = {id(model.source_embedding), id(model.target_embedding)}
    assert 1 <= tables(graph.node) <= len(embeddings)


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


def test_tf_serving_loader_matches_in_process_translator(trained_model, export_base):
    version_dir = os.path.join(export_base, "1")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_AS_TF_SERVING, version_dir, json.dumps(SENTENCES)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(
        [line for line in result.stdout.splitlines() if line.startswith("RESULT ")][-1][7:]
    )

    model, src, tgt = trained_model
    translator = Translator(model, src, tgt, beam_size=BEAM_SIZE, max_output_length=MAX_LENGTH)
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

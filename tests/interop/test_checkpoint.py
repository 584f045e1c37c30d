"""A downloaded checkpoint folder is untrusted input: nothing in it runs,
nothing is allocated before its sizes are checked, nothing outside it is
read, and every mismatch is named."""

import json
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.interop import checkpoint, marian
from tests.interop import marian_checkpoints as checkpoints

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return checkpoints.build_checkpoint(str(tmp_path_factory.mktemp("hostile") / "marian"))


@pytest.fixture
def folder(original, tmp_path):
    return shutil.copytree(original, str(tmp_path / "copy"))


def _edit_json(folder, name, **changes):
    path = os.path.join(folder, name)
    with open(path) as f:
        values = json.load(f)
    values.update(changes)
    with open(path, "w") as f:
        json.dump(values, f)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_that_runs_code_is_refused(folder, tmp_path):
    marker = str(tmp_path / "ran")
    os.remove(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "pytorch_model.bin"), "wb") as f:
        pickle.dump({"model.shared.weight": _RunsCode(marker)}, f)
    with pytest.raises(ValueError, match=r"weights_only=True\): Unsupported") as caught:
        marian.read_marian(folder)
    assert not os.path.exists(marker)
    assert "weights_only=False" not in str(caught.value)  # PyTorch's advice is not passed on


def test_a_pytorch_file_imports_as_the_safetensors_one(original, tmp_path):
    folder = checkpoints.build_checkpoint(str(tmp_path / "bin"), safetensors=False)
    assert not os.path.exists(os.path.join(folder, "model.safetensors"))
    from_bin = marian.read_marian(folder)["tensors"]
    from_safetensors = marian.read_marian(original)["tensors"]
    # PyTorch's state dict also holds the tied copies and the fixed position
    # tables, accepted as what they are (checked equal).
    assert set(from_bin) - set(from_safetensors) == {
        "lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
        "model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight",
    }  # fmt: skip
    assert set(from_safetensors) <= set(from_bin)
    for name, value in from_safetensors.items():
        np.testing.assert_array_equal(from_bin[name], value, err_msg=name)


def test_without_pytorch_a_pytorch_file_is_one_clear_error(folder, monkeypatch):
    os.remove(os.path.join(folder, "model.safetensors"))
    torch.save({"x": torch.zeros(1)}, os.path.join(folder, "pytorch_model.bin"))
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="pytorch_model.bin.*pip install torch"):
        checkpoint.read_tensors(folder)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_precision_checkpoint_reads_widened_without_tensorflow(original, tmp_path, dtype):
    from transformers import MarianMTModel

    folder = shutil.copytree(original, str(tmp_path / dtype))
    os.remove(os.path.join(folder, "model.safetensors"))
    model = MarianMTModel.from_pretrained(original).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    expected = {k: v.float().numpy() for k, v in model.state_dict().items()}
    # NumPy knows bfloat16 only once something registers it: TensorFlow
    # does, so read in a process that never loads it.
    script = (
        "import sys, numpy as np\n"
        "from keras_transformer.interop import checkpoint\n"
        "tensors = checkpoint.read_tensors(sys.argv[1])\n"
        "assert 'tensorflow' not in sys.modules\n"
        "np.savez(sys.argv[2], **tensors)\n"
    )
    out = str(tmp_path / "read.npz")
    result = subprocess.run(
        [sys.executable, "-c", script, folder, out], capture_output=True, text=True,
        timeout=300, env={**os.environ, "KERAS_BACKEND": "numpy"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    read = dict(np.load(out))
    assert read and all(value.dtype == np.float32 for value in read.values())
    for name, value in read.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def _shard(folder, tensors, name, save, parts=3):
    """Writes `tensors` as `parts` shards and their index, as
    save_pretrained(max_shard_size=...) does."""
    names = sorted(tensors)
    weight_map = {}
    for i in range(parts):
        shard = f"{name}-{i + 1:05d}-of-{parts:05d}"
        save({k: tensors[k] for k in names[i::parts]}, os.path.join(folder, shard))
        weight_map.update({k: shard for k in names[i::parts]})
    with open(os.path.join(folder, f"{name}.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return weight_map


def _save_torch(tensors, path):
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)


@pytest.mark.parametrize("kind", ["save_pretrained", "safetensors", "pytorch"])
def test_a_sharded_checkpoint_reads_as_the_whole_one(original, tmp_path, kind):
    from safetensors.numpy import load_file, save_file

    folder = shutil.copytree(original, str(tmp_path / kind))
    whole = load_file(os.path.join(folder, "model.safetensors"))
    os.remove(os.path.join(folder, "model.safetensors"))
    if kind == "save_pretrained":
        from transformers import MarianMTModel

        MarianMTModel.from_pretrained(original).save_pretrained(folder, max_shard_size="20KB")
        assert os.path.exists(os.path.join(folder, "model.safetensors.index.json"))
    elif kind == "safetensors":
        _shard(folder, whole, "model.safetensors", save_file)
    else:
        _shard(folder, whole, "pytorch_model.bin", _save_torch)
    read = marian.read_marian(folder)["tensors"]
    assert set(read) == set(whole)
    for name, value in whole.items():
        np.testing.assert_array_equal(read[name], value, err_msg=name)


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda m, first: m.update({first: "../outside.safetensors"}),
         "points outside the checkpoint folder"),
        (lambda m, first: m.update({first: "model.safetensors-00002-of-00003"}),
         "does not put there"),
        (lambda m, first: m.update({"model.encoder.layers.7.fc1.bias": m[first]}),
         "names 'model.encoder.layers.7.fc1.bias', which its shard lacks"),
        (lambda m, first: m.clear(), "has no weight_map"),
    ],
)  # fmt: skip
def test_a_shard_index_that_disagrees_with_its_shards_is_named(original, tmp_path, edit, match):
    from safetensors.numpy import load_file, save_file

    folder = shutil.copytree(original, str(tmp_path / "shards"))
    whole = load_file(os.path.join(folder, "model.safetensors"))
    os.remove(os.path.join(folder, "model.safetensors"))
    weight_map = _shard(folder, whole, "model.safetensors", save_file)
    edit(weight_map, sorted(weight_map)[0])
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": weight_map}, f)
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        checkpoint.read_tensors(folder)


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(vocab_size=10**9), r"config.json: vocab_size must be an integer in \[1, 1000000\]"),
        (
            dict(encoder_layers=10**4, decoder_layers=10**4),
            r"encoder_layers must be an integer in \[1, 128\]. Received: 10000",
        ),
        (dict(d_model=-4), "d_model must be an integer in .* Received: -4"),
        (dict(d_model="512"), "d_model must be an integer in .* Received: '512'"),
        # Each stack's heads divide the width.
        (
            dict(decoder_attention_heads=3),
            "d_model=32 is not a multiple of decoder_attention_heads=3",
        ),
        (
            dict(encoder_attention_heads=5),
            "d_model=32 is not a multiple of encoder_attention_heads=5",
        ),
        (dict(decoder_ffn_dim=0), r"decoder_ffn_dim must be an integer in \[1, "),
        (dict(activation_function="leaky_relu"), "activation_function 'leaky_relu'"),
        (dict(activation_function=["gelu"]), r"activation_function \['gelu'\] is not supported"),
        (dict(dropout="0.1"), r"config.json: dropout must be a number in \[0.0, 1.0\]"),
        (dict(dropout=1.0), r"config.json: dropout must be a number in \[0.0, 1.0\). Received"),
        (dict(attention_dropout=-0.1), "config.json: attention_dropout must be a number in"),
        (dict(model_type="bart"), "model_type 'bart'"),
        (dict(decoder_start_token_id=0), "decoder_start_token_id=0"),
        (dict(pad_token_id=10**6), r"pad_token_id must be an integer in \[0, "),
        (dict(eos_token_id=None), "eos_token_id must be an integer in .* Received: None"),
    ],
)
def test_a_config_is_checked_before_anything_is_read_or_allocated(folder, changes, match):
    os.remove(os.path.join(folder, "model.safetensors"))  # never reached
    _edit_json(folder, "config.json", **changes)
    with pytest.raises(ValueError, match=match):
        marian.read_marian(folder)


def _rewrite_tensors(folder, edit):
    from safetensors.numpy import load_file, save_file

    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda t: t.pop("model.decoder.layers.1.fc2.bias"), "lacks 1 tensor.*layers.1.fc2.bias"),
        (lambda t: t.update({"model.encoder.layers.9.fc1.weight": np.zeros((2, 2), "f4")}),
         "does not give: model.encoder.layers.9.fc1.weight"),
        (lambda t: t.update({"model.encoder.layers.0.fc1.bias": np.zeros(3, "f4")}),
         r"fc1.bias has shape \(3,\); the config gives \(64,\)"),
        (lambda t: t.update({"lm_head.weight": t["model.shared.weight"] + 1}),
         "lm_head.weight should be a copy of model.shared.weight"),
    ],
)  # fmt: skip
def test_tensors_missing_extra_or_misshapen_are_named(folder, edit, match):
    _rewrite_tensors(folder, edit)
    with pytest.raises(ValueError, match=match):
        marian.read_marian(folder)


def test_an_older_checkpoint_s_copies_and_position_tables_are_accepted(folder):
    from keras_transformer.layers import sinusoidal_position_encoding

    table = sinusoidal_position_encoding(64, 32, layout="halves")

    def add(tensors):
        tensors["lm_head.weight"] = tensors["model.shared.weight"].copy()
        tensors["model.encoder.embed_positions.weight"] = table

    _rewrite_tensors(folder, add)
    assert marian.read_marian(folder)["spec"].num_layers == 2


@pytest.fixture(scope="module")
def untied(tmp_path_factory):
    # Shared vocabulary, an output projection of its own.
    folder = str(tmp_path_factory.mktemp("untied") / "marian")
    return checkpoints.build_checkpoint(folder, tied=False)


@pytest.mark.parametrize("layout", ["transformers 5", "older"])
def test_a_shared_untied_checkpoint_reads_its_input_tables_where_they_are(untied, tmp_path, layout):
    folder = shutil.copytree(untied, str(tmp_path / "copy"))
    encoder, decoder = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
    if layout == "older":
        # One table for both stacks, under model.shared only.
        def edit(tensors):
            tensors["model.shared.weight"] = tensors.pop(encoder)
            tensors.pop(decoder)

        _rewrite_tensors(folder, edit)
    read = marian.read_marian(folder)
    spec, tensors = read["spec"], read["tensors"]
    # transformers 5 writes three tables and reads the stacks' own.
    assert spec.own_input_tables is (layout == "transformers 5")
    model = marian.build_model(spec)
    assert (model.source_embedding is model.target_embedding) is (layout == "older")
    marian.load_weights(model, spec, tensors, read["source"][2], read["target"][2])
    order = marian.marian_order(spec.source_vocab_size, spec.pad_id, read["source"][2],
                                spec.eos_id)  # fmt: skip
    for layer, name in ((model.source_embedding, encoder), (model.target_embedding, decoder)):
        table = tensors["model.shared.weight" if layout == "older" else name]
        np.testing.assert_array_equal(np.asarray(layer.embeddings), table[order])


def test_a_stack_s_own_table_missing_beside_the_other_is_named(untied, tmp_path):
    folder = shutil.copytree(untied, str(tmp_path / "copy"))
    _rewrite_tensors(folder, lambda t: t.pop("model.decoder.embed_tokens.weight"))
    with pytest.raises(ValueError, match="lacks 1 tensor.*model.decoder.embed_tokens.weight"):
        marian.read_marian(folder)


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "sub/../../x.spm"])
def test_a_tokenizer_file_outside_the_folder_is_refused(folder, name):
    _edit_json(folder, "tokenizer_config.json", source_spm=name)
    with pytest.raises(ValueError, match="points outside the checkpoint folder"):
        marian.read_marian(folder)


def test_a_symbolic_link_out_of_the_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "elsewhere.spm"
    shutil.copy(os.path.join(folder, "source.spm"), outside)
    os.symlink(outside, os.path.join(folder, "linked.spm"))
    _edit_json(folder, "tokenizer_config.json", source_spm="linked.spm")
    with pytest.raises(ValueError, match="linked.spm.*points outside"):
        marian.read_marian(folder)


def test_a_vocabulary_that_disagrees_with_the_config_is_named(folder):
    _edit_json(folder, "vocab.json", **{"▁extra": 10**6})
    with pytest.raises(ValueError, match="vocab.json: '▁extra' has id 1000000"):
        marian.read_marian(folder)


@pytest.mark.parametrize(
    "name,content,match",
    [
        ("source.spm", b"not a model", "source.spm is not a SentencePiece model: INTERNAL"),
        ("target.spm", b"", "target.spm is not a SentencePiece model: it is empty"),
    ],
)
def test_a_file_that_is_not_a_sentencepiece_model_is_named(folder, name, content, match):
    # Each went through to a traceback: SentencePiece's, or TF Text's op.
    with open(os.path.join(folder, name), "wb") as f:
        f.write(content)
    with pytest.raises(ValueError, match=match):
        marian.read_marian(folder)


def test_the_command_line_reports_a_bad_checkpoint_in_one_line(folder, tmp_path):
    _edit_json(folder, "config.json", vocab_size=10**9)
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.cli", "import", folder,
         "--output-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert lines == [
        "keras-transformer import: error: config.json: vocab_size must be an integer in "
        "[1, 1000000]. Received: 1000000000"
    ], result.stderr[-2000:]
    assert not os.path.exists(tmp_path / "run")


def test_an_existing_run_is_never_overwritten(original, tmp_path):
    os.makedirs(tmp_path / "run")
    with pytest.raises(FileExistsError, match="never overwrites"):
        marian.import_marian(original, str(tmp_path / "run"))


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(num_beams=0), r"generation_config.json: num_beams must be an integer in \[1, 256\]"),
        (dict(num_beams=10**9), "num_beams must be an integer in"),
        (dict(num_beams=2.5), "num_beams must be an integer"),
        (dict(max_length="long"), "max_length must be an integer >= 1. Received: 'long'"),
        (dict(max_length=float("inf")), "max_length must be an integer"),
        (dict(num_beams=10**400), "num_beams must be an integer in"),
        (dict(max_new_tokens=True), "max_new_tokens must be an integer"),
        (dict(length_penalty=float("inf")), "length_penalty must be a finite number. Received"),
        (dict(length_penalty=float("-inf")), "length_penalty must be a finite number"),
        (dict(length_penalty="short"), "length_penalty must be a finite number"),
        (dict(length_penalty=10**400), r"length_penalty must be .* Received: 10{38}\.\.\.$"),
        (dict(renormalize_logits="yes"), "renormalize_logits must be true or false"),
    ],
)
def test_generation_settings_are_checked_and_named(folder, changes, match):
    _edit_json(folder, "generation_config.json", **changes)
    with pytest.raises(ValueError, match=match):
        marian.read_marian(folder)

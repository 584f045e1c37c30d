import json

import pytest

from keras_transformer.training.config import TrainConfig, read_config_file


def test_round_trips_through_a_dict():
    config = TrainConfig(
        preset="small", epochs=3, model_overrides={"num_layers": 2}, average_last=2
    )
    again = TrainConfig.from_dict(config.to_dict())
    assert again == config and again.model_overrides == {"num_layers": 2}


@pytest.mark.parametrize(
    "values,message",
    [
        ({"preset": "huge"}, "Unknown preset 'huge'"),
        ({"strategy": "tpu"}, "strategy='tpu'"),
        ({"epochs": 0}, "epochs=0"),
        ({"batch_tokens": 2.5}, "batch_tokens=2.5"),
        ({"vocab_size": True}, "vocab_size=True"),
        ({"warmup_steps": -1}, "warmup_steps=-1"),
        ({"average_last": -1}, "average_last=-1"),
        ({"steps_per_epoch": 0}, "steps_per_epoch=0"),
        ({"time_limit_minutes": 0}, "time_limit_minutes=0"),
        ({"time_limit_minutes": 5, "strategy": "multi_worker"}, "multi_worker"),
        ({"length_policy": "drop"}, "'drop'"),
        ({"peak_learning_rate": 0.0}, "peak_learning_rate"),
        ({"peak_learning_rate": 5e-3, "lr_scale": 2.0}, "not both"),
        ({"preset": "transformer_tiny"}, "set `joint_vocabulary`"),
        ({"model_overrides": {"share_embeddings": True}}, "set `joint_vocabulary`"),
        (
            {"batch_tokens": 64, "max_length": 128},
            r"`batch_tokens` \(64\) must be at least `max_length` \(128\)",
        ),
    ],
)
def test_bad_values_are_named(values, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**values)


def test_the_shipped_transformer_tiny_recipe_is_the_published_one():
    import os

    path = os.path.join(
        os.path.dirname(__file__),
        "..",
        "..",
        "benchmarks",
        "configs",
        "multi30k_transformer_tiny.yaml",
    )
    config = TrainConfig.from_dict(read_config_file(path))
    assert config.preset == "transformer_tiny" and config.joint_vocabulary
    assert (config.peak_learning_rate, config.warmup_steps, config.batch_tokens) == (
        0.005,
        2000,
        4096,
    )
    assert config.epochs * config.steps_per_epoch == 8000 and config.average_last == 10
    assert config.label_smoothing == 0.1


def test_unknown_keys_are_named_with_the_known_ones():
    with pytest.raises(
        ValueError, match=r"Unknown training config keys: \['epoch'\]. Known keys: .*'epochs'"
    ):
        TrainConfig.from_dict({"epoch": 3})


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_config_files_use_the_same_keys(tmp_path, suffix):
    path = tmp_path / f"train{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"epochs": 4, "batch-tokens": 2048}))
    else:
        path.write_text("epochs: 4\nbatch-tokens: 2048\n")
    values = read_config_file(str(path))
    assert values == {"epochs": 4, "batch_tokens": 2048}
    assert TrainConfig.from_dict(values).batch_tokens == 2048


def test_bad_config_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        read_config_file(str(tmp_path / "missing.yaml"))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a mapping"):
        read_config_file(str(listed))


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("run.yaml", b"epochs: [1\n", "not YAML: expected ',' or ']', but got '<stream end>' "
                                      "at line 2, column 1"),
        ("run.json", b'{"epochs": ', "Expecting value: line 1 column 12 (char 11)"),
        ("run.yaml", b"epochs: 2\n\xff\n", "'utf-8' codec can't decode byte 0xff"),
    ],
)  # fmt: skip
def test_a_config_file_that_cannot_be_read_is_named_in_one_line(tmp_path, name, content, problem):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError) as caught:
        read_config_file(str(path))
    message = str(caught.value)
    assert message.startswith(f"Config file {path} cannot be read: ") and problem in message
    assert "\n" not in message

"""The files that configure the official TF Serving image parse as TF
Serving reads them, and agree with each other."""

import os
import re

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

SERVING = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "serving"
)


def _read(name):
    with open(os.path.join(SERVING, name), encoding="utf-8") as f:
        return f.read()


def _parse(text):
    return text_format.Parse(text, model_server_config_pb2.ModelServerConfig())


def _compose():
    return yaml.safe_load(_read("docker-compose.yml"))["services"]["tensorflow-serving"]


def test_models_config_serves_the_latest_translator_from_the_mounted_exports():
    (config,) = _parse(_read("models.config")).model_config_list.config
    assert config.name == "translator" and config.model_platform == "tensorflow"
    assert config.model_version_policy.latest.num_versions == 1
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in _compose()["volumes"])
    assert mounts["../exports"] == os.path.dirname(config.base_path)


def test_the_commented_label_example_is_a_valid_config():
    lines = _read("models.config").splitlines()
    example = [
        re.sub(r"^(\s*)# ", r"\1", line)
        for line in lines
        if re.match(r"\s*# (model_version_policy|version_labels)", line)
    ]
    body = [line for line in lines if "latest" not in line and not line.strip().startswith("#")]
    text = "\n".join(body).replace(
        'model_platform: "tensorflow"', 'model_platform: "tensorflow"\n' + "\n".join(example)
    )
    (config,) = _parse(text).model_config_list.config
    assert dict(config.version_labels) == {"stable": 1, "canary": 2}
    assert set(config.version_labels.values()) <= set(config.model_version_policy.specific.versions)


def test_compose_passes_the_mounted_config_files():
    service = _compose()
    flags = dict(arg.split("=", 1) for arg in service["command"])
    mounted = {volume.split(":")[1] for volume in service["volumes"]}
    assert flags["--model_config_file"] in mounted
    assert flags["--batching_parameters_file"] in mounted
    assert flags["--enable_batching"] == "true"
    assert {"8500:8500", "8501:8501"} <= set(service["ports"])


def test_the_local_server_serves_the_shipped_config(export_base, tmp_path):
    """`keras-transformer serve --model-config-file serving/models.config`,
    with the official image's /models mount pointed at a local export."""
    from keras_transformer.serving.model_config import read_model_config
    from keras_transformer.serving.options import ServerOptions
    from keras_transformer.serving.server import start

    (entry,) = read_model_config(os.path.join(SERVING, "models.config"))
    assert (entry.name, entry.base_path, entry.version_policy) == (
        "translator",
        "/models/translator",
        "latest",
    )
    text = _read("models.config").replace("/models/translator", export_base)
    local = tmp_path / "models.config"
    local.write_text(text)
    serving = start(ServerOptions(port=0, poll_seconds=0), read_model_config(str(local)))
    try:
        assert sorted(serving.models.manager("translator").versions) == [1]
    finally:
        serving.stop()

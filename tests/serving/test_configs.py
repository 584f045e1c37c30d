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


def _kubernetes(name):
    return list(yaml.safe_load_all(_read(os.path.join("kubernetes", name))))


def _tensorflow_release():
    """The release of TensorFlow that exports are made with (setup.cfg's pin)."""
    import tensorflow as tf

    return tf.__version__.split("-")[0]


def _container():
    (deployment,) = _kubernetes("deployment.yaml")
    assert deployment["kind"] == "Deployment"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


def test_the_images_are_the_tf_serving_release_of_the_exports_tensorflow():
    release = _tensorflow_release()
    _, container = _container()
    for image, environment in (
        (_compose()["image"], _compose()["environment"]),
        (container["image"], [f"{e['name']}={e['value']}" for e in container["env"]]),
    ):
        assert image == f"tensorflow/serving:{release}", image
        (xla,) = [e for e in environment if e.startswith("TF_XLA_FLAGS=")]
        # One TensorFlow release and one machine type per XLA cache prefix.
        assert f"--tf_xla_persistent_cache_prefix=tensorflow_serving_{release}_x86_64" in xla
    setup = open(os.path.join(os.path.dirname(SERVING), "setup.cfg"), encoding="utf-8").read()
    major_minor = ".".join(release.split(".")[:2])
    assert f"tensorflow>={major_minor},<" in setup


def test_the_deployment_runs_what_the_compose_file_runs_and_the_service_fronts_it():
    deployment, container = _container()
    flags = dict(arg.split("=", 1) for arg in container["args"])
    compose_flags = dict(arg.split("=", 1) for arg in _compose()["command"])
    for flag in ("--enable_batching", "--xla_cpu_compilation_enabled"):
        assert flags[flag] == compose_flags[flag] == "true"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert os.path.dirname(flags["--model_config_file"]) == mounts["config"]
    assert os.path.dirname(flags["--batching_parameters_file"]) == mounts["config"]
    (config,) = _parse(_read("models.config")).model_config_list.config
    assert os.path.dirname(config.base_path) == mounts["models"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": int(flags["--port"]), "rest": int(flags["--rest_api_port"])}
    requests = container["resources"]["requests"]
    assert requests["cpu"] and requests["memory"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    (service,) = _kubernetes("service.yaml")
    assert service["spec"]["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} == set(ports)
    (autoscaler,) = _kubernetes("hpa.yaml")
    target = autoscaler["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert autoscaler["spec"]["minReplicas"] <= autoscaler["spec"]["maxReplicas"]


def test_the_probes_ask_what_keras_transformer_serve_answers_as_tf_serving(export_base, tmp_path):
    """The readiness and liveness probes' paths, on the REST port, against
    `keras-transformer serve` serving the shipped config: 200 once the
    version is AVAILABLE, as TF Serving's model-status endpoint."""
    import json
    import urllib.request

    from keras_transformer.serving.model_config import read_model_config
    from keras_transformer.serving.options import ServerOptions
    from keras_transformer.serving.server import start

    _, container = _container()
    probes = [container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert {probe["port"] for probe in probes} == {ports["rest"]}
    local = tmp_path / "models.config"
    local.write_text(_read("models.config").replace("/models/translator", export_base))
    options = ServerOptions(port=0, rest_api_port=0, poll_seconds=0)
    serving = start(options, read_model_config(str(local)))
    try:
        for probe in probes:
            url = f"http://127.0.0.1:{serving.rest_port}{probe['path']}"
            with urllib.request.urlopen(url, timeout=30) as answer:
                assert answer.status == 200
                states = [v["state"] for v in json.load(answer)["model_version_status"]]
            assert states == ["AVAILABLE"]
    finally:
        serving.stop()

import json
import os
import textwrap

import numpy as np
import pytest

from keras_transformer.training.strategies import get_strategy, worker_info
from tests.processes import free_port, start_python

TRAIN = """
import json, os, sys
import numpy as np
import tensorflow as tf
{setup}
from keras_transformer.training import TrainConfig, train
config = TrainConfig(
    dataset=sys.argv[1], output_dir=sys.argv[2], preset="tiny", epochs=2, steps_per_epoch=6,
    model_overrides=dict(num_layers=1, d_model=32, num_heads=2, dff=64, dropout=0.0),
    vocab_size=120, batch_tokens=512, max_length=64, warmup_steps=20, verbose=2,
    strategy=sys.argv[3], devices={devices}, seed=3)
model, history = train(config)
replicas = model.distribute_strategy.num_replicas_in_sync
in_sync = all(
    all(np.array_equal(v.values[0].numpy(), r.numpy()) for r in v.values)
    for v in model.trainable_variables if hasattr(v, "values"))
losses = history.history["loss"]
print("RESULT", json.dumps(dict(replicas=replicas, in_sync=bool(in_sync), losses=losses)))
"""


def _run(script, *args, env=None):
    return start_python("-c", script, *args, env=env)


def _result(proc, timeout=600):
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def _dataset(files):
    return f"parallel:{files['train.en']},{files['train.de']}"


def test_mirrored_over_two_logical_cpus(parallel_files, tmp_path):
    setup = textwrap.dedent("""
        cpu = tf.config.list_physical_devices("CPU")[0]
        config = [tf.config.LogicalDeviceConfiguration()] * 2
        tf.config.set_logical_device_configuration(cpu, config)
    """)
    script = TRAIN.format(setup=setup, devices='["/cpu:0", "/cpu:1"]')
    result = _result(_run(script, _dataset(parallel_files), str(tmp_path / "run"), "mirrored"))
    assert result["replicas"] == 2
    assert result["in_sync"]
    assert result["losses"][-1] < result["losses"][0]


def test_multi_worker_over_two_processes(parallel_files, tmp_path):
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    script = TRAIN.format(setup="", devices="None")
    run = str(tmp_path / "run")
    procs = [
        _run(
            script,
            _dataset(parallel_files),
            run,
            "multi_worker",
            env={
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}}
                )
            },
        )
        for i in range(2)
    ]
    results = [_result(p) for p in procs]
    assert all(r["replicas"] == 2 for r in results)
    # Both workers end with the same weights.
    import h5py

    def weights(path):
        values = []
        with h5py.File(path, "r") as f:
            f.visititems(
                lambda name, obj: (
                    values.append((name, obj[()])) if isinstance(obj, h5py.Dataset) else None
                )
            )
        return dict(values)

    chief = weights(os.path.join(run, "final.weights.h5"))
    other = weights(os.path.join(run, "final.worker_1.weights.h5"))
    assert chief.keys() == other.keys() and len(chief) > 10
    for name in chief:
        np.testing.assert_allclose(chief[name], other[name], atol=1e-6, err_msg=name)


def test_strategy_errors(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        get_strategy("multi_worker")
    with pytest.raises(ValueError, match="Unknown strategy"):
        get_strategy("tpu")


def test_worker_info(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}),
    )
    assert worker_info() == (1, False)
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"worker": ["a:1"], "chief": ["c:3"]},
                "task": {"type": "chief", "index": 0},
            }
        ),
    )
    assert worker_info() == (0, True)

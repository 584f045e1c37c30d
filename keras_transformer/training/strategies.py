"""Picking a tf.distribute strategy: one device, mirrored, or multi-worker."""

import json
import os

import tensorflow as tf


def get_strategy(name="auto", devices=None):
    """Returns the distribution strategy for `name`.

    Args:
        name: `"auto"`: the default strategy (the first GPU when present,
            else the CPU); `"mirrored"`: `MirroredStrategy` over `devices`
            (default: every local GPU, or the CPU); `"multi_worker"`:
            `MultiWorkerMirroredStrategy`, the cluster read from `TF_CONFIG`.
        devices: device names for `"mirrored"`.

    Returns:
        A `tf.distribute.Strategy`.
    """
    if name == "auto":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "`multi_worker` needs the cluster in the TF_CONFIG environment "
                'variable, e.g. {"cluster": {"worker": ["host1:port", '
                '"host2:port"]}, "task": {"type": "worker", "index": 0}}'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"Unknown strategy {name!r}; use auto, mirrored or multi_worker")


def worker_info():
    """`(task_index, is_chief)` of this process in a multi-worker cluster."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    index = int(task.get("index", 0))
    kind = task.get("type", "worker")
    is_chief = kind == "chief" or (
        kind == "worker" and index == 0 and "chief" not in config.get("cluster", {})
    )
    return index, is_chief

"""PNG plots of a run: loss and accuracy curves, learning-rate schedule."""

import csv
import os

from keras_transformer._extras import require
from keras_transformer.schedules import WarmupSchedule
from keras_transformer.training.run_directory import RunDirectory


def _read_history(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"No training history at {path}")
    rows = {}
    try:
        with open(path, encoding="utf-8") as f:
            for row in csv.DictReader(f):
                # A resumed epoch replaces its first try.
                rows[int(row["epoch"])] = {k: float(v) if v else None for k, v in row.items()}
    except (ValueError, KeyError, TypeError, csv.Error) as error:  # a damaged file
        problem = f"no {error} column" if isinstance(error, KeyError) else error
        raise ValueError(f"{path} is not a training history of `train` ({problem})") from None
    if not rows:
        raise ValueError(f"The training history {path} is empty")
    return [rows[e] for e in sorted(rows)]


def plot_run(run_path, output_dir=None):
    """Writes `curves.png` (loss and masked accuracy per epoch, training and
    validation) and `learning_rate.png` for the run at `run_path`.

    Returns:
        The paths written.
    """
    matplotlib = require("matplotlib")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDirectory(run_path)
    output_dir = output_dir or run.path
    os.makedirs(output_dir, exist_ok=True)
    rows = _read_history(run.history)
    epochs = [int(r["epoch"]) + 1 for r in rows]

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, metric, label in (
        (axes[0], "loss", "loss"),
        (axes[1], "masked_accuracy", "masked accuracy"),
    ):
        for prefix, style in (("", "-o"), ("val_", "--s")):
            key = prefix + metric
            if rows[0].get(key) is not None:
                axis.plot(
                    epochs,
                    [float("nan") if r.get(key) is None else r[key] for r in rows],
                    style,
                    label=("validation " if prefix else "training ") + label,
                )
        axis.set_xlabel("epoch")
        axis.set_title(label)
        axis.grid(alpha=0.3)
        if axis.get_lines():
            axis.legend()
    figure.tight_layout()
    curves = os.path.join(output_dir, "curves.png")
    figure.savefig(curves, dpi=100)
    plt.close(figure)

    config = run.read_json(run.config)
    model_config = run.read_json(run.model_config)
    schedule = WarmupSchedule(
        model_config["d_model"], config["warmup_steps"], config.get("lr_scale", 1.0)
    )
    steps = max(config["warmup_steps"] * 5, 100)
    xs = list(range(0, steps, max(1, steps // 500)))
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.plot(xs, [float(schedule(x)) for x in xs])
    axis.axvline(config["warmup_steps"], color="gray", linestyle=":", label="warmup_steps")
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("learning rate")
    axis.set_title(
        f"WarmupSchedule(d_model={model_config['d_model']}, warmup_steps={config['warmup_steps']})"
    )
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    schedule_path = os.path.join(output_dir, "learning_rate.png")
    figure.savefig(schedule_path, dpi=100)
    plt.close(figure)
    return [curves, schedule_path]

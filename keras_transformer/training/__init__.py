"""Training: schedules, losses, metrics, callbacks, strategies and the fit loop.

Names load on first use; importing the package checks the `data` extra."""

from keras_transformer import _lazy

__getattr__, __dir__, __all__ = _lazy.attach(
    globals(),
    {
        "Backup": "backup",
        "BestWeights": "best_weights",
        "EpochWeights": "epoch_weights",
        "PreparedData": "preparation",
        "RunDirectory": "run_directory",
        "TimeLimit": "time_limit",
        "TrainConfig": "config",
        "average_checkpoints": "averaging",
        "average_weights": "averaging",
        "build_model": "trainer",
        "load_run": "run_directory",
        "prepare_data": "preparation",
        "save_weights_atomically": "atomic_files",
        "write_json_atomically": "atomic_files",
        "set_precision": "trainer",
        "train": "trainer",
    },
    requires=(("tensorflow", "data"), ("tensorflow_text", "data")),
)

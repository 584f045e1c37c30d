"""The default search space and which of its dimensions are whose.

Plain data: the command line reads it without loading keras-tuner.
"""

DEFAULT_SPACE = {
    "num_layers": [1, 2, 3, 4, 6],
    "d_model": [128, 256, 512],
    "num_heads": [1, 2, 4, 8],
    "dff": [256, 512, 1024, 2048],
    "dropout": [0.0, 0.1, 0.2, 0.3],
    "norm_first": [False, True],
    "warmup_steps": [500, 1000, 2000, 4000],
    "label_smoothing": [0.0, 0.1, 0.2],
    "batch_tokens": [1024, 2048, 4096],
    "batch_size": [16, 32, 64],
}
# Dimensions of `fit`, not of the model: token budgets for datasets,
# sentences for arrays.
BATCH_DIMENSIONS = ("batch_tokens", "batch_size")
# The dimensions that are `Transformer` arguments (the rest are the
# recipe's or `fit`'s); `search.train_best` passes the same ones on.
MODEL_DIMENSIONS = ("num_layers", "d_model", "num_heads", "dff", "dropout", "norm_first")
# Dimensions renamed since 0.1.0, as the `Transformer` arguments they set.
RENAMED_DIMENSIONS = {"dropout_rate": "dropout"}

"""A heatmap of the cross-attention behind one translation."""

import numpy as np

from keras_transformer._extras import require


def plot_cross_attention(session_model, sentence, path):
    """Writes a PNG of the best hypothesis' cross-attention over the source.

    Args:
        session_model: a `SessionModel` of an export (its `attention`
            signature is used).
        sentence: the source sentence (str).
        path: the PNG to write.
    """
    matplotlib = require("matplotlib")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = session_model.run(
        "attention", {"text": np.array([sentence.encode("utf-8")], dtype=object)}
    )
    source = [t.decode("utf-8") for t in out["source_tokens"][0]]
    target = [t.decode("utf-8") for t in out["target_tokens"][0]]
    weights = out["weights"][0]
    cols = [i for i, t in enumerate(source) if t != "<pad>"]
    rows = []
    for i, token in enumerate(target):
        if token in ("<pad>",):
            break
        rows.append(i)
        if token == "</s>":
            break
    figure, axis = plt.subplots(
        figsize=(max(4, 0.45 * len(cols) + 2), max(3, 0.4 * len(rows) + 1.5))
    )
    axis.imshow(weights[np.ix_(rows, cols)], cmap="viridis", aspect="auto", vmin=0.0)
    axis.set_xticks(range(len(cols)), [source[i] for i in cols], rotation=60, ha="right")
    axis.set_yticks(range(len(rows)), [target[i] for i in rows])
    axis.set_xlabel("source")
    axis.set_ylabel("translation")
    axis.set_title("Cross-attention (last decoder block, mean over heads)")
    figure.tight_layout()
    try:
        # Opened here, so that a path that cannot be written is named as the
        # user's error, not as one inside matplotlib.
        with open(path, "wb") as f:
            figure.savefig(f, format="png", dpi=110)
    finally:
        plt.close(figure)
    return path

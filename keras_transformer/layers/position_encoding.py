"""The sinusoidal position encoding of "Attention Is All You Need"."""

import numpy as np

LAYOUTS = ("interleaved", "halves")


def sinusoidal_position_encoding(length, depth, layout="interleaved"):
    """Returns the paper's sinusoidal position encoding.

    `PE(pos, 2i) = sin(pos / 10000^(2i / depth))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))`: sines on even channels,
    cosines on odd channels, interleaved (tensor2tensor's and the paper's
    order). With `layout="halves"` the same values come as `[sines |
    cosines]`: channel `i < depth / 2` is `sin(pos / 10000^(2i / depth))` and
    channel `depth / 2 + i` its cosine, the table of Marian (OPUS-MT) and
    fairseq checkpoints.

    Args:
        length: number of positions, a positive int.
        depth: number of channels, a positive int.
        layout: `"interleaved"` or `"halves"`.

    Returns:
        A float32 NumPy array of shape `[length, depth]`.

    Example:

    >>> sinusoidal_position_encoding(4, 8).shape
    (4, 8)
    """
    for name, value in (("length", length), ("depth", depth)):
        if not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"`layout` must be one of {LAYOUTS}. Received: layout={layout!r}")
    positions = np.arange(length, dtype=np.float64)[:, None]  # [length, 1]
    two_i = (np.arange(depth) // 2 * 2).astype(np.float64)[None, :]  # [1, depth]
    angles = positions / np.power(10000.0, two_i / depth)  # [length, depth]
    encoding = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    if layout == "halves":
        # Even channels (the sines) first, then the odd ones (the cosines).
        encoding = np.concatenate([encoding[:, 0::2], encoding[:, 1::2]], axis=1)
    return encoding.astype(np.float32)

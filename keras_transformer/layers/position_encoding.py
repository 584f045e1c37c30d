"""The sinusoidal position encoding of "Attention Is All You Need"."""

import numpy as np


def sinusoidal_position_encoding(length, depth):
    """Returns the paper's sinusoidal position encoding.

    `PE(pos, 2i) = sin(pos / 10000^(2i / depth))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / depth))`: sines on even channels,
    cosines on odd channels, interleaved.

    Args:
        length: number of positions, a positive int.
        depth: number of channels, a positive int.

    Returns:
        A float32 NumPy array of shape `[length, depth]`.

    Example:

    >>> sinusoidal_position_encoding(4, 8).shape
    (4, 8)
    """
    for name, value in (("length", length), ("depth", depth)):
        if not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    positions = np.arange(length, dtype=np.float64)[:, None]  # [length, 1]
    two_i = (np.arange(depth) // 2 * 2).astype(np.float64)[None, :]  # [1, depth]
    angles = positions / np.power(10000.0, two_i / depth)  # [length, depth]
    encoding = np.where(np.arange(depth) % 2 == 0, np.sin(angles), np.cos(angles))
    return encoding.astype(np.float32)

import numpy as np
import pytest

from keras_transformer.layers import sinusoidal_position_encoding
from tests import reference
from tests.backends import assert_allclose, assert_array_equal


@pytest.mark.parametrize("length,depth", [(1, 2), (17, 8), (50, 33), (128, 512)])
def test_matches_the_paper(length, depth):
    pe = sinusoidal_position_encoding(length, depth)
    assert pe.shape == (length, depth) and pe.dtype == np.float32
    assert_allclose(pe, reference.position_encoding(length, depth), atol=1e-6)


def test_first_position_alternates_zero_and_one():
    assert_allclose(sinusoidal_position_encoding(1, 6)[0], [0, 1, 0, 1, 0, 1])


@pytest.mark.parametrize(
    "length,depth,match", [(0, 4, "length"), (4, -2, "depth"), (2.5, 4, "length")]
)
def test_invalid_arguments(length, depth, match):
    with pytest.raises(ValueError, match=match):
        sinusoidal_position_encoding(length, depth)


def _marian_table(length, depth):
    """Marian's table as `transformers` builds it: `[sin | cos]` halves."""
    angles = np.array(
        [
            [pos / np.power(10000, 2 * (j // 2) / depth) for j in range(depth)]
            for pos in range(length)
        ]
    )
    sentinel = depth // 2 if depth % 2 == 0 else depth // 2 + 1
    table = np.zeros((length, depth))
    table[:, :sentinel] = np.sin(angles[:, 0::2])
    table[:, sentinel:] = np.cos(angles[:, 1::2])
    return table


@pytest.mark.parametrize("length,depth", [(1, 2), (17, 8), (50, 33), (64, 512)])
def test_halves_match_marian(length, depth):
    pe = sinusoidal_position_encoding(length, depth, layout="halves")
    assert pe.dtype == np.float32
    assert_allclose(pe, _marian_table(length, depth), atol=1e-6)


def test_halves_are_the_interleaved_channels_reordered():
    interleaved = sinusoidal_position_encoding(9, 10)
    halves = sinusoidal_position_encoding(9, 10, layout="halves")
    assert_array_equal(halves, interleaved[:, [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]])


def test_unknown_layout():
    with pytest.raises(ValueError, match="layout.*'sines'"):
        sinusoidal_position_encoding(4, 4, layout="sines")

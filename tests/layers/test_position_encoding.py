import numpy as np
import pytest

from keras_transformer.layers import sinusoidal_position_encoding
from tests import reference


@pytest.mark.parametrize("length,depth", [(1, 2), (17, 8), (50, 33), (128, 512)])
def test_matches_the_paper(length, depth):
    pe = sinusoidal_position_encoding(length, depth)
    assert pe.shape == (length, depth) and pe.dtype == np.float32
    np.testing.assert_allclose(pe, reference.position_encoding(length, depth), atol=1e-6)


def test_first_position_alternates_zero_and_one():
    np.testing.assert_allclose(sinusoidal_position_encoding(1, 6)[0], [0, 1, 0, 1, 0, 1])


@pytest.mark.parametrize(
    "length,depth,match", [(0, 4, "length"), (4, -2, "depth"), (2.5, 4, "length")]
)
def test_invalid_arguments(length, depth, match):
    with pytest.raises(ValueError, match=match):
        sinusoidal_position_encoding(length, depth)

"""Property-based checks (hypothesis) of the whole model: padding in the
source or target never changes a real position's logits, and a target
position's logits never depend on later target tokens."""

import keras
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_transformer.models import Transformer
from tests.backends import assert_allclose, to_numpy

VOCAB = 30
# JAX and PyTorch compile each op for every new shape: fewer draws there.
PROPERTY = settings(
    max_examples={"tensorflow": 15, "torch": 6}.get(keras.backend.backend(), 3), deadline=None
)


def _model(norm_first, seed):
    model = Transformer(
        2,
        16,
        2,
        32,
        VOCAB,
        VOCAB,
        dropout=0.0,
        norm_first=norm_first,
        kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
    )
    model.build(((None, None), (None, None)))
    return model


cases = dict(
    batch=st.integers(1, 3),
    source_length=st.integers(1, 8),
    target_length=st.integers(1, 8),
    extra=st.integers(1, 4),
    norm_first=st.booleans(),
    seed=st.integers(0, 2**16),
)


@PROPERTY
@given(**cases)
def test_padding_never_changes_real_logits(
    batch, source_length, target_length, extra, norm_first, seed
):
    rng = np.random.default_rng(seed)
    model = _model(norm_first, seed)
    context = rng.integers(1, VOCAB, (batch, source_length))
    target = rng.integers(1, VOCAB, (batch, target_length))
    pad = np.zeros((batch, extra), context.dtype)
    alone = to_numpy(model((context, target)))
    padded = to_numpy(model((np.concatenate([context, pad], 1), np.concatenate([target, pad], 1))))
    assert_allclose(padded[:, :target_length], alone, atol=1e-4)


@PROPERTY
@given(cut=st.integers(1, 7), **cases)
def test_logits_never_depend_on_later_targets(
    batch, source_length, target_length, extra, norm_first, seed, cut
):
    rng = np.random.default_rng(seed)
    model = _model(norm_first, seed)
    total = target_length + extra
    cut = min(cut, total - 1)
    context = rng.integers(1, VOCAB, (batch, source_length))
    target = rng.integers(1, VOCAB, (batch, total))
    changed = target.copy()
    changed[:, cut:] = rng.integers(1, VOCAB, (batch, total - cut))
    before, after = to_numpy(model((context, target))), to_numpy(model((context, changed)))
    assert_allclose(after[:, :cut], before[:, :cut], atol=1e-4)

import keras
import pytest

from keras_transformer.optimizers import paper_adam
from tests.backends import assert_allclose
from tests.reference import inverse_sqrt_learning_rate, paper_learning_rate


@pytest.mark.parametrize(
    "kwargs, reference",
    [
        (dict(lr_scale=1.0), lambda s: paper_learning_rate(s, 128, 400, 1.0)),
        (dict(lr_scale=2.0), lambda s: paper_learning_rate(s, 128, 400, 2.0)),
        (dict(peak_learning_rate=0.005), lambda s: inverse_sqrt_learning_rate(s, 0.005, 400)),
    ],
)
def test_adam_of_the_paper_under_its_schedule(kwargs, reference):
    optimizer = paper_adam(128, 400, **kwargs)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    schedule = keras.saving.deserialize_keras_object(optimizer.get_config()["learning_rate"])
    for t in [0, 1, 199, 399, 400, 3999]:
        assert_allclose(float(schedule(t)), reference(t + 1), rtol=1e-5)


def test_scale_and_peak_together_are_refused():
    with pytest.raises(ValueError, match="lr_scale.*peak_learning_rate"):
        paper_adam(128, 400, lr_scale=2.0, peak_learning_rate=0.005)

import dataclasses

import pytest

from keras_transformer._config_docs import attribute_docs
from keras_transformer.training.config import TrainConfig


class _Documented:
    """Summary.

    Attributes:
        alpha: first line
            continued here.
        beta_gamma: `code`: with a colon.

    Example:
        not: an attribute
    """


def test_sections_and_continuations():
    assert attribute_docs(_Documented) == {
        "alpha": "first line continued here.",
        "beta_gamma": "`code`: with a colon.",
    }


def test_no_section_gives_nothing():
    assert attribute_docs(type("Bare", (), {"__doc__": "Nothing here."})) == {}


@pytest.mark.parametrize("config_cls", ["train", "tune"])
def test_every_config_field_is_documented(config_cls):
    if config_cls == "train":
        cls = TrainConfig
    else:
        from keras_transformer.tuning.config import TuneConfig as cls
    docs = attribute_docs(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(docs) == sorted(names)
    assert all(len(docs[name]) > 10 for name in names)

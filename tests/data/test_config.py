import dataclasses

import pytest

from keras_transformer._config_docs import attribute_docs
from keras_transformer.data.config import DataConfig
from keras_transformer.training.config import TrainConfig
from keras_transformer.tuning.config import TuneConfig

DATA_KEYS = [f.name for f in dataclasses.fields(DataConfig)]


@pytest.mark.parametrize(
    "values, message",
    [
        ({"dataset": ""}, "`dataset` is required"),
        ({"dataset": "wmt"}, "Unknown dataset"),
        ({"dataset": "parallel:only.en"}, "parallel:SOURCE_FILE,TARGET_FILE"),
        ({"valid": "tfds:"}, "Unknown dataset"),
        ({"valid": 3}, "`valid` must be a dataset spec"),
        ({"max_length": 0}, "`max_length` must be a positive int"),
        ({"vocab_size": 1.5}, "`vocab_size` must be a positive int"),
        ({"tokenizer_sample": True}, "`tokenizer_sample` must be a positive int"),
        ({"length_policy": "cut"}, "`length_policy` must be one of"),
    ],
)
@pytest.mark.parametrize("config_cls", [DataConfig, TrainConfig, TuneConfig])
def test_every_config_checks_the_data_keys_alike(config_cls, values, message):
    required = {"directory": "search"} if config_cls is TuneConfig else {}
    with pytest.raises(ValueError, match=message):
        config_cls(**{"dataset": "synthetic", **required, **values})


@pytest.mark.parametrize(
    "dataset, valid, expected",
    [
        ("synthetic", None, ("synthetic", "validation")),
        ("tfds:wmt14_translate/de-en", None, ("tfds:wmt14_translate/de-en", "validation")),
        ("parallel:a.en,a.de", None, None),
        ("parallel:a.en,a.de", "parallel:v.en,v.de", ("parallel:v.en,v.de", "validation")),
        ("synthetic", "none", None),
    ],
)
def test_validation_spec(dataset, valid, expected):
    assert DataConfig(dataset=dataset, valid=valid).validation_spec() == expected


def test_train_and_tune_share_the_data_keys_with_one_documentation():
    train_docs, tune_docs = attribute_docs(TrainConfig), attribute_docs(TuneConfig)
    for key in DATA_KEYS:
        assert key in {f.name for f in dataclasses.fields(TrainConfig)}
        assert key in {f.name for f in dataclasses.fields(TuneConfig)}
        assert train_docs[key] == tune_docs[key] == attribute_docs(DataConfig)[key]


def test_tune_needs_a_dataset_and_validation_data():
    with pytest.raises(TypeError, match="dataset"):
        TuneConfig(directory="search")
    with pytest.raises(ValueError, match="Tuning needs validation data"):
        TuneConfig(dataset="parallel:a.en,a.de", directory="search")


def test_data_options_carry_a_tune_config_into_a_train_config():
    tune = TuneConfig(
        dataset="parallel:a.en,a.de",
        valid="parallel:v.en,v.de",
        directory="search",
        vocab_size=300,
        joint_vocabulary=True,
        max_length=40,
        length_policy="truncate",
    )
    train = TrainConfig(**tune.data_options(), preset="transformer_tiny")
    assert train.data_options() == tune.data_options()
    assert sorted(tune.data_options()) == sorted(DATA_KEYS)

"""`plot_run`: a run's curves, and a damaged history named."""

import os
import shutil

import pytest

from keras_transformer.training.plots import plot_run


@pytest.fixture
def run(trained_run, tmp_path):
    path = str(tmp_path / "run")
    shutil.copytree(trained_run["run"], path)
    return path


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"epoch,loss\n0,2.5\n1,\xff\n", "'utf-8' codec can't decode byte 0xff"),
        (b"step,loss\n1,2.5\n", "no 'epoch' column"),
        (b"epoch,loss\n0,abc\n", "could not convert string to float: 'abc'"),
        (b"epoch,loss\n0,2.5,7,8\n", "float() argument must be"),
    ],
)
def test_a_damaged_history_is_named(run, content, problem):
    history = os.path.join(run, "history.csv")
    with open(history, "wb") as f:
        f.write(content)
    with pytest.raises(ValueError) as caught:
        plot_run(run, os.path.join(run, "plots"))
    message = str(caught.value)
    assert message.startswith(f"{history} is not a training history of `train` (")
    assert problem in message


def test_a_history_with_an_empty_cell_plots(run, recwarn):
    # A run whose last epoch was cut before validating (a time limit).
    with open(os.path.join(run, "history.csv"), "w") as f:
        f.write("epoch,loss,val_loss\n0,2.5,3.0\n1,2.0,\n")
    paths = plot_run(run, os.path.join(run, "plots"))
    assert [os.path.basename(p) for p in paths] == ["curves.png", "learning_rate.png"]
    assert all(os.path.getsize(p) > 1000 for p in paths)
    assert not [w for w in recwarn if "legend" in str(w.message)]  # no empty axis' legend

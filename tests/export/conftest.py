import pytest

from keras_transformer.export import export_run
from tests.export.exported import BEAM_SIZE, MAX_LENGTH


@pytest.fixture(scope="session")
def export_base(trained_run, tmp_path_factory):
    """The trained run exported once as version 1 of a model base path."""
    base = str(tmp_path_factory.mktemp("exports") / "translator")
    export_run(trained_run["run"], base, max_length=MAX_LENGTH, beam_size=BEAM_SIZE)
    return base

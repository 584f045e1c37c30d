"""Settings of the export the tests in this folder share (see conftest)."""

MAX_LENGTH = 24
BEAM_SIZE = 3

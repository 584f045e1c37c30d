"""Settings of the export the tests in this folder share (see conftest)."""

MAX_LENGTH = 24
BEAM_SIZE = 3
# translate_sample of the shared export is greedy, so that every route
# (session, C++ loader, server) gives the same translation; sampling
# itself is tested on an export of its own (test_sample_and_score.py).
SAMPLING = dict(sampling_topk=1)

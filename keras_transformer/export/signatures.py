"""The signatures every export has, and their string inputs (all `[batch]`).

Plain data: the command line reads it without loading TensorFlow.
"""

SIGNATURES = (
    "serving_default",
    "translate_nbest",
    "translate_greedy",
    "attention",
    "translate_sample",
    "score",
)
# The string inputs of each signature (all `[batch]`).
SIGNATURE_INPUTS = {name: ("text",) for name in SIGNATURES} | {"score": ("text", "translation")}

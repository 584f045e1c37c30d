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
    "translate_prefix",
    "translate_prefix_nbest",
)
# The string inputs of each signature (all `[batch]`).
SIGNATURE_INPUTS = {name: ("text",) for name in SIGNATURES} | {
    "score": ("text", "translation"),
    "translate_prefix": ("text", "target_prefix"),
    "translate_prefix_nbest": ("text", "target_prefix"),
}
# The signature that continues a target prefix for each that does not.
PREFIX_SIGNATURES = {
    "serving_default": "translate_prefix",
    "translate_nbest": "translate_prefix_nbest",
}

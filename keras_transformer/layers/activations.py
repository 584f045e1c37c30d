"""Feed-forward activations beyond Keras's own names."""

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
def gelu_tanh(x):
    """GELU with the tanh approximation of Hendrycks and Gimpel (2016):
    `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.

    What BERT, GPT-2 and `transformers`' `gelu_new` (`gelu_fast`,
    `gelu_pytorch_tanh`) compute; Keras's `"gelu"` is the exact one. A
    model names it `activation="keras_transformer>gelu_tanh"` (or passes
    the function); its config saves that name.

    Args:
        x: a tensor.

    Returns:
        The activation of `x`, of its shape and dtype.

    Example:

    >>> round(float(gelu_tanh(keras.ops.convert_to_tensor(1.0))), 4)
    0.8412
    """
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="keras_transformer")
def gelu_sigmoid(x):
    """GELU's sigmoid approximation (Hendrycks and Gimpel, 2016):
    `x sigmoid(1.702 x)`.

    What CLIP and `transformers`' `quick_gelu` compute, and CTranslate2's
    `GELUSigmoid`. A model names it
    `activation="keras_transformer>gelu_sigmoid"`.

    Args:
        x: a tensor.

    Returns:
        The activation of `x`, of its shape and dtype.

    Example:

    >>> round(float(gelu_sigmoid(keras.ops.convert_to_tensor(1.0))), 4)
    0.8458
    """
    return x * keras.ops.sigmoid(1.702 * x)


def get(identifier):
    """`keras.activations.get`, which also takes the name of a registered
    activation (`"keras_transformer>gelu_tanh"`, `"package>name"`)."""
    if isinstance(identifier, str) and ">" in identifier:
        found = keras.saving.get_registered_object(identifier)
        if found is None:
            raise ValueError(f"No activation is registered as {identifier!r}")
        return found
    return keras.activations.get(identifier)

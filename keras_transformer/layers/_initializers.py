"""Initializer helpers of the layers."""


def clone_initializer(initializer):
    """A fresh copy, so that sublayers do not share one seeded initializer."""
    return initializer.__class__.from_config(initializer.get_config())

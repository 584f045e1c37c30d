"""Arguments renamed since 0.1.0, so that one thing has one name everywhere
(`source_*`, `dropout`, keras-hub's `self_attention_cache` and
`cross_attention_cache`). The old names keep working for code, with a
`DeprecationWarning`, and silently for configs saved before."""

import warnings


def pop_renamed(kwargs, renames, owner):
    """Takes the old names of `renames` out of `kwargs`, warning for each.

    Args:
        kwargs: the keyword arguments a function received (modified).
        renames: `{old name: new name}`.
        owner: what the arguments are given to, for the warning.

    Returns:
        `{new name: value}` for the old names that were given.

    Example:

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     pop_renamed({"dropout_rate": 0.2}, {"dropout_rate": "dropout"}, "Transformer")
    {'dropout': 0.2}
    >>> str(caught[0].message)
    '`Transformer(dropout_rate=...)` is deprecated: use `dropout`'
    """
    found = {}
    for old, new in renames.items():
        if old in kwargs:
            warnings.warn(
                f"`{owner}({old}=...)` is deprecated: use `{new}`",
                DeprecationWarning,
                stacklevel=3,
            )
            found[new] = kwargs.pop(old)
    return found


def take_renamed(kwargs, renames, owner, given):
    """`given` (`{new name: value}`) with the values passed under old names
    put in their place (`pop_renamed`), for a function whose `**kwargs`
    exist only to accept the old names.

    Raises:
        TypeError: `kwargs` holds any other name, as a function without
            `**kwargs` would.
    """
    renamed = pop_renamed(kwargs, renames, owner)
    if kwargs:
        raise TypeError(f"{owner} got unexpected keyword arguments {sorted(kwargs)}")
    return {**given, **renamed}


def resolve(new_name, new_value, default, renamed):
    """The value of argument `new_name`: the one given under its old name
    (in `renamed`, from `pop_renamed`) when the new one kept its default.

    Raises:
        ValueError: when both names were given different values.
    """
    if new_name not in renamed:
        return new_value
    old_value = renamed[new_name]
    if new_value is not default and new_value != default and new_value != old_value:
        raise ValueError(
            f"`{new_name}` was given under its new and its deprecated name, with different "
            f"values: {new_value!r} and {old_value!r}"
        )
    return old_value


def translate_config(config, renames):
    """A config saved with old keys, under the new ones (no warning: a file
    saved by an earlier version is not code the user can change)."""
    config = dict(config)
    for old, new in renames.items():
        if old in config:
            value = config.pop(old)
            config.setdefault(new, value)
    return config


def deprecated_alias(old, new):
    """A read-only property `old` that warns and returns attribute `new`."""

    def get(self):
        warnings.warn(
            f"`{type(self).__name__}.{old}` is deprecated: use `{new}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, new)

    return property(get, doc=f"Deprecated name of `{new}`.")


def deprecated_method(old, new):
    """A method `old` that warns and calls method `new`."""

    def method(self, *args, **kwargs):
        warnings.warn(
            f"`{type(self).__name__}.{old}` is deprecated: use `{new}`",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, new)(*args, **kwargs)

    method.__name__ = old
    method.__doc__ = f"Deprecated name of `{new}`."
    return method

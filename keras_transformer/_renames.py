"""Arguments renamed since 0.1.0, so that one thing has one name everywhere
(`source_*`, `dropout`, keras-hub's `self_attention_cache` and
`cross_attention_cache`). The old names keep working for code, with a
`DeprecationWarning`, and silently for configs saved before."""

import warnings


def pop_renamed(kwargs, renames, owner, stacklevel=3):
    """Takes the old names of `renames` out of `kwargs`, warning for each.

    Args:
        kwargs: the keyword arguments a function received (modified).
        renames: `{old name: new name}`.
        owner: what the arguments are given to, for the warning.
        stacklevel: the warning's, from here (3: the caller's caller).

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
                stacklevel=stacklevel,
            )
            found[new] = kwargs.pop(old)
    return found


def take_renamed(kwargs, renames, owner, given):
    """`given` (`{new name: value}`, None where not given) with the values
    passed under old names put in their place (`pop_renamed`), for a
    function whose `**kwargs` exist only to accept the old names.

    Raises:
        TypeError: `kwargs` holds any other name, as a function without
            `**kwargs` would.
        ValueError: an argument was given under both names (tensors, which
            cannot be compared to tell whether they agree).
    """
    renamed = pop_renamed(kwargs, renames, owner, stacklevel=4)
    if kwargs:
        raise TypeError(f"{owner} got unexpected keyword arguments {sorted(kwargs)}")
    both = sorted(name for name in renamed if given.get(name) is not None)
    if both:
        raise ValueError(f"{owner}: {both} given under their new and their deprecated names")
    return {**given, **renamed}


# A key not given (None is a value a key could be given).
_NOT_GIVEN = object()


def rename_keys(mapping, renames, owner):
    """Puts the values that `mapping` holds under old names of `renames`
    under the new ones (modified in place), warning for each.

    Raises:
        ValueError: when both names were given different values.
    """
    renamed = pop_renamed(mapping, renames, owner, stacklevel=4)
    for name in renamed:
        mapping[name] = resolve(name, mapping.get(name, _NOT_GIVEN), _NOT_GIVEN, renamed)


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

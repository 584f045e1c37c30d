"""Argument checks shared by the layers, training and decoding, and how
their messages show a value that a client or a file gave."""


def shown(value, most=80, quoted=True):
    """`repr(value)` (`str` if not `quoted`), cut after `most` characters:
    a name that a request or a file gives is echoed in errors, and may be
    megabytes long (gRPC's clients drop a status whose message is over
    16 KiB).

    >>> shown("x" * 1000, most=10)
    "'xxxxxxxx... (1000 characters)"
    """
    text = repr(value) if quoted else str(value)
    if len(text) <= most:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, (str, bytes)) else ""
    return f"{text[: most - 1]}...{size}"


def shown_names(names, most=5):
    """The first `most` of `names`, each `shown`, and how many more.

    >>> shown_names(["a", "b", "c"], most=2)
    "['a', 'b', and 1 more]"
    """
    names = list(names)
    listed = [shown(name) for name in names[:most]]
    if len(names) > most:
        listed.append(f"and {len(names) - most} more")
    return f"[{', '.join(listed)}]"


def check_positive_int(name, value):
    """Raises a `ValueError` naming `name` unless `value` is an int > 0 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")


def check_positive_number(name, value):
    """Raises a `ValueError` naming `name` unless `value` is an int or float > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")


def check_non_negative_int(name, value):
    """Raises a `ValueError` naming `name` unless `value` is an int >= 0 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")


def check_port(name, value):
    """Raises a `ValueError` naming `name` unless `value` is a TCP port
    number: an int from 0 (any free port) to 65535 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
        raise ValueError(f"`{name}` must be a port from 0 to 65535. Received: {name}={value!r}")


def check_nice_steps(name, value):
    """Raises a `ValueError` naming `name` unless `value` is a number of
    `nice` steps: an int from 0 to 19 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 19:
        raise ValueError(f"`{name}` must be an integer from 0 to 19. Received: {name}={value!r}")


def check_non_negative_number(name, value):
    """Raises a `ValueError` naming `name` unless `value` is an int or float >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"`{name}` must be a number >= 0. Received: {name}={value!r}")


def options_from_dict(cls, values, what):
    """`cls(**values)` for an options dataclass read from a `--config`
    file; a key that is not one of its fields is an error naming it."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"Unknown {what} option(s): {', '.join(unknown)}")
    return cls(**values)

"""Argument checks shared by the layers, training and decoding."""


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

"""Argument checks shared by the layers, training and decoding, and how
their messages show a value that a client or a file gave."""

import numbers

INF = float("inf")


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
    """Raises a `ValueError` naming `name` unless `value` is a finite int or
    float > 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < INF:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")


def check_non_negative_int(name, value):
    """Raises a `ValueError` naming `name` unless `value` is an int >= 0 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")


def check_alpha(alpha):
    """Raises a `ValueError` unless `alpha`, the length penalty's
    exponent, is a finite number (an infinite one makes every score 0 or
    infinite). A negative one favours short translations, as
    `generate()`'s negative `length_penalty` does."""
    if not _is_number(alpha) or not -INF < alpha < INF:
        raise ValueError(f"`alpha` must be a finite number. Received: alpha={alpha!r}")


def check_sampling(temperature, top_k, top_p, names=("temperature", "top_k", "top_p")):
    """Validates the sampling options; returns them as float, int, float.

    `temperature` is a finite number > 0, `top_k` an int >= 0 (0: every
    token), `top_p` in (0, 1] (1: every token); messages call them by
    `names` (`export` calls them `sampling_temperature`, ...).
    """
    hot, k, p = names
    if isinstance(top_k, numbers.Integral) and not isinstance(top_k, bool):
        top_k = int(top_k)  # NumPy's ints too
    if not _is_number(temperature):
        raise ValueError(f"`{hot}` must be a number > 0. Received: {temperature!r}")
    if not 0 < temperature < INF:
        raise ValueError(f"`{hot}` must be a finite number > 0. Received: {hot}={temperature!r}")
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
        raise ValueError(f"`{k}` must be an int >= 0 (0: every token). Received: {top_k!r}")
    if not _is_number(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"`{p}` must be in (0, 1] (1: every token). Received: {top_p!r}")
    return float(temperature), top_k, float(top_p)


def _is_number(value):
    """A real number, NumPy's included, but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_rate(name, value):
    """Raises a `ValueError` naming `name` unless `value` is a dropout rate:
    a number from 0 to below 1 (not a bool)."""
    if not _is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


def check_port(name, value):
    """Raises a `ValueError` naming `name` unless `value` is a TCP port
    number: an int from 0 (any free port) to 65535 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
        raise ValueError(f"`{name}` must be a port from 0 to 65535. Received: {name}={value!r}")


def split_address(address, name):
    """`(host, port)` of a `HOST:PORT` address (`ray://` or not), or None if
    it names no port; a port past 65535 is refused naming `name`, where
    gRPC and sockets would wrap it round to another port (99999 is 34463).

    >>> split_address("127.0.0.1:8500", "--server"), split_address("auto", "--server")
    (('127.0.0.1', 8500), None)
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    if int(port) > 65535:
        raise ValueError(f"{name} {address}: a port is at most 65535")
    return host, int(port)


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

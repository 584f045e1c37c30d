"""The `Attributes:` section of a config dataclass, as one line per field.

The command line derives its flags' help from it, so a field is documented
once, in its class, and the two cannot drift apart.
"""

import inspect
import re

_ENTRY = re.compile(r"^(\w+):\s*(.*)$")


def attribute_docs(cls):
    """`{field name: description}` from the `Attributes:` sections of `cls`
    and of its base classes (a subclass's entry wins).

    Args:
        cls: a class whose docstring lists its attributes Google-style.

    Returns:
        A dict of one-line descriptions (continuation lines joined).

    Example:

    >>> class Point:
    ...     '''A point.
    ...
    ...     Attributes:
    ...         x: the abscissa, in
    ...             metres.
    ...         y: the ordinate.
    ...     '''
    >>> attribute_docs(Point)
    {'x': 'the abscissa, in metres.', 'y': 'the ordinate.'}
    """
    docs = {}
    for klass in reversed(cls.__mro__):
        docs.update(_own_attribute_docs(klass.__dict__.get("__doc__")))
    return docs


def _own_attribute_docs(doc):
    lines = inspect.cleandoc(doc or "").splitlines()
    try:
        start = lines.index("Attributes:") + 1
    except ValueError:
        return {}
    docs, name, indent = {}, None, None
    for line in lines[start:]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break  # the next section
        match = _ENTRY.match(line.strip())
        if depth == indent and match:
            name = match.group(1)
            docs[name] = match.group(2)
        elif name is not None:
            docs[name] += " " + line.strip()
    return docs

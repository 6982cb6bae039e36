"""YAML reading with YAML 1.2 numbers: ``8.0e9`` and ``1e9`` are floats.

PyYAML alone follows YAML 1.1 and reads them as strings.
"""

from __future__ import annotations

import re

import yaml


class Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with the YAML 1.2 float syntax."""


_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _ch in "-+0123456789.":
    Loader.yaml_implicit_resolvers[_ch] = [
        (tag, rx)
        for tag, rx in Loader.yaml_implicit_resolvers.get(_ch, [])
        if tag != "tag:yaml.org,2002:float"
    ]
    Loader.yaml_implicit_resolvers[_ch].insert(0, ("tag:yaml.org,2002:float", _FLOAT))


def load(text: str) -> object:
    """Parse YAML text (one document) with :class:`Loader`.

    Examples
    --------
    >>> load("{a: 8.0e9, b: 1e9, c: 3, d: 2.5}")
    {'a': 8000000000.0, 'b': 1000000000.0, 'c': 3, 'd': 2.5}
    """
    return yaml.load(text, Loader=Loader)

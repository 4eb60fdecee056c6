"""Public names imported on first use (PEP 562), for the packages whose import must stay cheap.

``import cortana`` (and the terminal's path to its prompt) should not pay for
the agent's loop, the engines or pydantic models until they are used. A package
lists where each of its names lives and hands that to :func:`lazy_names`:

    _LAZY = {"Agent": "cortana.agent.agent"}
    __getattr__ = lazy_names(__name__, _LAZY)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``homes`` (name -> module) once.

    The imported value is stored in the package, so later lookups do not come back here.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__

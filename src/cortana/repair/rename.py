"""A rename the request asks for, made without a model: every whole-word use of the old name, then the tests judge.

"rename the function calc_total to cart_total everywhere" is a mechanical
change; a model asked to make it in several files forgets one. So a request
of that shape (``FixRequest.rename``) becomes one candidate patch: each
Python file of the project (its tests included: they must follow the name)
with every whole-word occurrence of the old name replaced, in code, strings
and comments alike, as a careful person's project-wide replace would. The
tests then judge it like any candidate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cortana.repair.patches import Block, Patch

__all__ = ["rename_patch"]


def rename_patch(texts: Mapping[str, str], old: str, new: str) -> Patch | None:
    """Every whole-word ``old`` in ``texts`` (path -> text) made ``new``; None when no file uses ``old``."""
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])")
    files = {path: pattern.sub(new, text) for path, text in texts.items() if pattern.search(text)}
    if not files:
        return None
    blocks = tuple(Block(path, texts[path], text) for path, text in sorted(files.items()))
    return Patch(blocks, files)

"""URL slugs made from titles."""

import re


def slugify(title: str, sep: str = "-") -> str:
    """``title`` as lowercase words joined by ``sep``, without punctuation."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return sep.join(words)

"""Working with the text of a note."""

import string


def normalize(text: str) -> str:
    """``text`` in lowercase, with punctuation removed."""
    return text.lower().translate(str.maketrans("", "", string.punctuation))


def title(text: str) -> str:
    """The first line of ``text``, without surrounding spaces."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""

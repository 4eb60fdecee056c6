"""Working with the text of a note."""

import string


def normalize(text: str) -> str:
    """``text`` in lowercase, with punctuation removed."""
    return text.lower().translate(str.maketrans("", "", string.punctuation))


def title(text: str) -> str:
    """The first line of ``text``, without surrounding spaces."""
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def count_words(text: str) -> dict[str, int]:
    """How many times each word of ``text`` appears, ignoring case and punctuation."""
    counts: dict[str, int] = {}
    for word in normalize(text).split():
        counts[word] = counts.get(word, 0) + 1
    return counts

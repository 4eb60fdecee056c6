"""Tags typed by users: "#python, #Python, #pytest"."""

from utils.lists import dedupe


def parse_tags(text: str) -> list[str]:
    """The tags in ``text``, without the ``#``, each once whatever its case (the first spelling wins)."""
    tags = [part.strip().lstrip("#") for part in text.split(",")]
    return dedupe([tag for tag in tags if tag], key=str.lower)

"""Finding lines that contain a text."""


def matching_lines(lines: list[str], needle: str) -> list[tuple[int, str]]:
    """The (line number, line) pairs of the ``lines`` that contain ``needle``, numbered from 1."""
    return [(number, line) for number, line in enumerate(lines, start=1) if needle in line]

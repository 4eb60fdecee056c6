"""Split a docstring into a tool description and per-argument descriptions.

Understands the three styles people actually write: Google (``Args:``),
Sphinx (``:param x:``) and NumPy (``Parameters`` underlined with dashes).
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_SECTION = re.compile(
    r"^(args|arguments|parameters|params|keyword args|keyword arguments"
    r"|returns?|raises|yields?|examples?|notes?|see also|attributes)\s*:?\s*$",
    re.IGNORECASE,
)
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:\s]+\s+)?(\w+)\s*:\s*(.*)$")
_NUMPY_ARG = re.compile(r"^(\w+)\s*(?::.*)?$")
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return ``(description, {argument: description})`` for a docstring.

    The description is the text before the first section (``Args:``,
    ``Returns:``, ``:param``...). Continuation lines are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    numpy_style = False
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        numpy_header = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x") is not None
        header = _SECTION.match(stripped)
        if header and (stripped.endswith(":") or numpy_header):
            section = header.group(1).lower()
            numpy_style = numpy_header
            current = None
            i += 2 if numpy_header else 1
            continue
        sphinx = _SPHINX_ARG.match(stripped)
        if sphinx:
            section, current = "params", sphinx.group(1)
            params[current] = sphinx.group(2).strip()
        elif stripped.startswith(":") and section in (None, "params"):
            section, current = "other", None  # :returns:, :raises: ...
        elif section is None:
            description.append(line)
        elif section in _ARG_SECTIONS or section == "params":
            indent = len(line) - len(line.lstrip())
            google = None if numpy_style else _GOOGLE_ARG.match(stripped)
            numpy = _NUMPY_ARG.match(stripped) if numpy_style and indent == 0 else None
            if google and (indent == 0 or current is None or indent <= _arg_indent(lines, section_start=i)):
                current = google.group(1).lstrip("*")
                params[current] = google.group(2).strip()
            elif numpy and stripped:
                current = numpy.group(1)
                params[current] = ""
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        i += 1
    return " ".join(_paragraphs(description)).strip(), params


def _arg_indent(lines: list[str], section_start: int) -> int:
    """Indentation of argument names in the section containing ``section_start``."""
    for j in range(section_start, -1, -1):
        if _SECTION.match(lines[j].strip()):
            for candidate in lines[j + 1 :]:
                if candidate.strip():
                    return len(candidate) - len(candidate.lstrip())
            break
    return 0


def _paragraphs(lines: list[str]) -> list[str]:
    """Join wrapped lines; keep paragraph breaks as a single space-separated text."""
    text = "\n".join(lines).strip()
    return [" ".join(part.split()) for part in re.split(r"\n\s*\n", text) if part.strip()]

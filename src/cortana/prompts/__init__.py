"""Prompt texts Cortana adds to conversations, kept as plain files you can read and override.

``prompt_text(name)`` reads ``<name>.md`` from this folder; a folder named in
``CORTANA_PROMPTS_DIR`` that holds a file of the same name wins, one file at a time.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from cortana.config import prompts_dir

__all__ = ["as_data", "prompt_text", "strip_turn_context"]


@functools.cache
def prompt_text(name: str) -> str:
    """The text of prompt ``name`` (without trailing newline)."""
    override_dir = prompts_dir()
    if override_dir is not None:
        candidate = override_dir / f"{name}.md"
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8").rstrip("\n")
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8").rstrip("\n")


_CONTEXT_BLOCK = re.compile(r"\A<context>\n.*?\n</context>\n\n", re.S)


def as_data(text: str) -> str:
    """Untrusted text made safe to stand inside the turn's ``<context>`` block: a ``</context>`` in it is broken."""
    return text.replace("</context>", "<\\/context>")


def strip_turn_context(content: str) -> str:
    """What the user typed: a user message's content without the ``<context>`` block the loop put before it."""
    return _CONTEXT_BLOCK.sub("", content, count=1)

"""Prompt texts Cortana adds to conversations, kept as plain files you can read and override.

``prompt_text(name)`` reads ``<name>.md`` from this folder; a folder named in
``CORTANA_PROMPTS_DIR`` that holds a file of the same name wins, one file at a time.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from cortana.config import prompts_dir
from cortana.display import valid_text

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

_LESS = "<\uff1c\ufe64"  # <, and the fullwidth and small forms a model may read as one
_TAG = re.compile(
    rf"[{_LESS}](?=\s*/\s*(?i:context|tool_call|tool_response|tools|think)\s*[>\uff1e\ufe65])"  # closers
    rf"|[{_LESS}](?=\s*(?:context|tool_call|tool_response|tools|think)\s*[>\uff1e\ufe65])"  # openers
    rf"|[{_LESS}](?=/?(?:s|bos|eos|start_of_turn|end_of_turn)>)"
    rf"|[{_LESS}](?=[|\uff5c])"
    r"|<(?=<\s*/?\s*SYS\s*>>)"
    r"|\[(?=\s*/?\s*(?:INST|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|SYSTEM_PROMPT)\s*\])",
)
"""The opening bracket of what a prompt's structure is made of: the ``<context>`` block's tags (a closing one
in any case and spacing), the tool-call tags, and the chat templates' special tokens (``<|im_end|>``,
``<｜begin▁of▁sentence｜>``, ``<start_of_turn>``, ``</s>``, ``[INST]``, ``<<SYS>>``). Engines read special
tokens in message text as the real token (llama.cpp and Ollama tokenize the rendered prompt with special
tokens parsed), so text from outside could end the user's turn and write one of its own."""
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e0fff\U0001d173-\U0001d17a]"
)
"""Characters a person does not see but a model reads: zero widths, direction controls, tag characters (which
can spell a whole hidden message), variation selectors, invisible fillers."""


def as_data(text: str) -> str:
    """Untrusted text made safe to stand in a prompt as data: it cannot close or forge the prompt's structure.

    A ``\\`` goes after the opening bracket of every tag or special token in :data:`_TAG` (``</context>``
    becomes ``<\\/context>``, ``<|im_end|>`` becomes ``<\\|im_end|>``), and invisible characters are removed.
    The result reads the same to a model and a person, and escaping it again changes nothing. The run
    applies it to every block of a turn's ``<context>`` and to every tool result, so no producer of either
    has to remember it.
    """
    return _TAG.sub(_escaped, _INVISIBLE.sub("", valid_text(text)))


def _escaped(match: re.Match[str]) -> str:
    bracket = match.group()
    return ("<" if bracket in _LESS else bracket) + "\\"


def strip_turn_context(content: str) -> str:
    """What the user typed: a user message's content without the ``<context>`` block the loop put before it."""
    return _CONTEXT_BLOCK.sub("", content, count=1)

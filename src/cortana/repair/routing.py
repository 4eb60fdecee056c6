"""Which requests go through the repair workflow without being named: asks to change code, in a folder with tests.

"fix the failing test", "make the tests pass", "add a --reverse flag",
"implement dedupe as its docstring says", "update the callers of
format_price", "X crashes with a KeyError": each asks for code to change, and
where the project has tests, its tests can judge the change. Questions
("which function rounds the weight?", "how does X work", "explain …") and
chat stay with the tool loop. The rule is deliberately plain: a change verb
or a report of something broken, and not a question that asks for no change.
A sentence opening with "when" is a question only when it ends with a question
mark ("When the config has no keep setting, keep the 7 newest" is a request).
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_REQUEST", "is_change_request"]

DEFAULT_REQUEST = "Make the failing tests pass."
"""What ``/fix`` and ``cortana fix`` ask for when given nothing else."""

_CHANGE = re.compile(
    r"\b(fix|fixes|implement|add|make\b.*\bpass|change|update|rename|refactor|remove|replace|support|handle|"
    r"use|keep|default to|should|instead|correct|repair|resolve|allow|accept|return|raise)\b",
    re.IGNORECASE,
)
_TROUBLE = re.compile(
    r"\b(fails?|failing|failed|error|exception|crash(es|ed)?|bug|broken|wrong|traceback|"
    r"\w+Error|off by one|doesn'?t work|does not work)\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(
    r"^\s*(what|which|why|how|where|when\b.*\?\s*$|who|whose|does|do|is|are|was|were|could you explain|can you explain|"
    r"explain|show|tell|describe|list|summari[sz]e|find|search|look|read|review)\b",
    re.IGNORECASE,
)
_ASKS_FIX = re.compile(r"\b(fix|implement|make\b.*\bpass|change|add|update|rename|repair)\b", re.IGNORECASE)


def is_change_request(text: str) -> bool:
    """Whether ``text`` asks for code to change (see the module docstring)."""
    stripped = text.strip()
    if len(stripped) < 4 or stripped.startswith(("/", "!")):
        return False
    if _QUESTION.match(stripped) and not _ASKS_FIX.search(stripped):
        return False
    return bool(_CHANGE.search(stripped) or _TROUBLE.search(stripped))

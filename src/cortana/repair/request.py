"""What a fix request asks for, read once: every reading of the request's words the workflow makes is here.

"make the failing test pass", "add a --reverse flag and document it",
"rename calc_total to cart_total", "update the tests for the new format":
the workflow needs to know whether a change is wanted even when every test
passes, whether edits the tests do not need are wanted too, whether the tests
themselves may change, and whether it is a rename it can make without a
model. Each is one rule over the words, in this file, and the result is one
frozen value the stages read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortana.repair.routing import DEFAULT_REQUEST

__all__ = ["FixRequest"]

_CHANGE = re.compile(
    r"\b(add|implement|make|change|rename|update|support|use|remove|replace|refactor|fix|allow|handle|default)\b",
    re.IGNORECASE,
)
_FAILING = re.compile(r"\b(failing|fails|failed)\b", re.IGNORECASE)
_MORE = re.compile(
    r"\b(add|implement|change|rename|update|support|use|remove|replace|refactor|allow|handle|default|document|"
    r"docstring|also)\b",
    re.IGNORECASE,
)
_TESTS_WANTED = re.compile(
    r"\b(update|change|fix|edit|rewrite|adjust)\b[^.]*\b(the )?tests?\b(?! (fail|pass))|\bwrite (a |the )?tests?\b",
    re.IGNORECASE,
)
_RENAME = re.compile(
    r"\brename\s+(?:the\s+)?(?:function|class|method|variable|constant|field|attribute|module|type)?\s*"
    r"`?(?P<old>[A-Za-z_][A-Za-z0-9_]*)`?(?:\(\))?\s+(?:to|into|as)\s+`?(?P<new>[A-Za-z_][A-Za-z0-9_]*)`?",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class FixRequest:
    """A fix request and what its words ask for.

    Attributes:
        text: the request as the user wrote it (``DEFAULT_REQUEST`` when empty).
        wants_change: a change is wanted even when every test passes ("add a --reverse flag"), not only a fix of
            what fails.
        wants_more: the request asks for something the failing tests may not check ("… and document it"): every
            edit of a passing patch is kept, not only those the tests need.
        tests_may_change: the user asked for the tests themselves to change ("update the tests").
        rename: ``(old, new)`` when it asks to rename one name to another (made without a model).
    """

    text: str
    wants_change: bool = False
    wants_more: bool = False
    tests_may_change: bool = False
    rename: tuple[str, str] | None = None

    @classmethod
    def parse(cls, text: str) -> FixRequest:
        """Read ``text`` once (see the module docstring)."""
        text = text.strip() or DEFAULT_REQUEST
        renamed = _RENAME.search(text)
        rename = (renamed["old"], renamed["new"]) if renamed and renamed["old"] != renamed["new"] else None
        return cls(
            text=text,
            wants_change=bool(_CHANGE.search(text)) and not _FAILING.search(text),
            wants_more=bool(_MORE.search(text)),
            tests_may_change=bool(_TESTS_WANTED.search(text)),
            rename=rename,
        )

"""What a fix request asks for, read once: every reading of the request's words the workflow makes is here.

"make the failing test pass", "add a --reverse flag and document it",
"rename calc_total to cart_total", "update the tests for the new format":
the workflow needs to know whether a change is wanted even when every test
passes, whether edits the tests do not need are wanted too, whether the tests
themselves may change, and whether it is a rename it can make without a
model. Each is one rule over the words, in this file, and the result is one
frozen value the stages read.

Some words bind the fix beyond what the tests check, and a patch the tests
accept can still go against them (``intent.py`` judges that): the files the
request names as the place of the change ("update the callers in report.py"),
names it says were renamed or removed on purpose ("I renamed format_price to
render_price"), and "don't change the tests".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortana.repair.routing import DEFAULT_REQUEST, is_change_request

__all__ = ["PATH", "FixRequest", "asks_to_change_tests"]

_FAILING = re.compile(r"\b(failing|fails|failed)\b", re.IGNORECASE)
_MORE = re.compile(
    r"\b(add|implement|change|rename|update|support|use|remove|replace|refactor|allow|handle|default|document|"
    r"docstring|also)\b",
    re.IGNORECASE,
)
_TESTS_WANTED = re.compile(
    r"\b(update|change|fix|edit|rewrite|adjust)\b[^.]*\b(the )?(?<!failing )(?<!failed )(?<!broken )tests?\b"
    r"(?! (fail|pass))|\bwrite (a |the )?tests?\b",
    re.IGNORECASE,
)
PATH = re.compile(r"\b(?P<path>[\w./-]+\.(?:py|pyi|js|ts|go|rs|rb|java|cfg|toml|ini|json|ya?ml))\b")
"""A file's path in a request's words (``shop/report.py``)."""
_PLACE_VERB = re.compile(
    r"\b(change|changes|edit|update|modify|fix|touch|patch|put|go|goes|belongs?|adjust|only|callers?|call sites?|"
    r"uses|usages?|imports?)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(
    r"[.;:!?]\s|\b(but|because|since|so|which|that|fails?|failing|breaks?|crash\w*)\b", re.IGNORECASE
)
_KEEP_TESTS = re.compile(
    r"\b(?:do not|don'?t|never|without|not)\s+(?:\w+\s+){0,2}?(?:chang\w*|touch\w*|edit\w*|modify\w*|updat\w*|"
    r"rewrit\w*|adjust\w*)\s+(?:\w+\s+){0,2}?tests?\b|\bleave\s+(?:the\s+|my\s+)?tests?\b|"
    r"\btests?\s+(?:are|is)\s+(?:right|correct)\b",
    re.IGNORECASE,
)
_NAME = r"`?(?P<{}>[A-Za-z_][A-Za-z0-9_]*)`?(?:\(\))?"
_RENAMED = re.compile(
    r"\b(?:I|we|I've|we've|I have|we have)\s+(?:just\s+|already\s+)?renamed\s+(?:the\s+)?"
    r"(?:function|class|method|variable|constant|field|attribute|type)?\s*"
    + _NAME.format("old")
    + r"\s+(?:to|into|as)\s+"
    + _NAME.format("new")
    + r"|"
    + _NAME.format("old2")
    + r"\s+(?:was|is|has been|got)\s+(?:now\s+)?renamed\s+(?:to|into|as)\s+"
    + _NAME.format("new2"),
    re.IGNORECASE,
)
_REMOVED = re.compile(
    r"\b(?:I|we|I've|we've|I have|we have)\s+(?:just\s+|already\s+)?(?:removed|deleted|dropped)\s+(?:the\s+)?"
    r"(?:function|class|method|variable|constant|field|attribute|type)?\s*"
    + _NAME.format("one")
    + r"|"
    + _NAME.format("two")
    + r"\s+(?:was|is|has been|got)\s+(?:removed|deleted|dropped|gone)\b"
    + r"|\bdo(?:n'?t| not)\s+(?:bring|put|add)\s+(?:back\s+)?"
    + _NAME.format("three")
    + r"\s+back\b",
    re.IGNORECASE,
)
_PRONOUNS = frozenset({"it", "this", "that", "them", "these", "those", "one"})
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
        renamed: ``(old, new)`` pairs the user says they renamed already ("I renamed X to Y"): the uses of ``old``
            left over are what to change, never ``old`` written back.
        gone: the names renamed or removed on purpose, which no patch may define again.
        places: the files it names as where the change goes ("update the callers in report.py"); a patch that
            touches none of them is not the fix asked for.
        only_places: it says the change goes only there ("only in report.py").
        keep_tests: it says to leave the tests as they are ("don't change the tests").
    """

    text: str
    wants_change: bool = False
    wants_more: bool = False
    tests_may_change: bool = False
    rename: tuple[str, str] | None = None
    renamed: tuple[tuple[str, str], ...] = ()
    gone: tuple[str, ...] = ()
    places: tuple[str, ...] = ()
    only_places: bool = False
    keep_tests: bool = False

    @classmethod
    def parse(cls, text: str) -> FixRequest:
        """Read ``text`` once (see the module docstring)."""
        text = text.strip() or DEFAULT_REQUEST
        renamed = tuple(_renamed(text))
        gone = [old for old, _ in renamed] + [name for name in _removed(text)]
        asked = _RENAME.search(text)
        rename = (asked["old"], asked["new"]) if asked and asked["old"] != asked["new"] else None
        if rename is not None and rename in renamed:
            rename = None  # "I renamed X to Y" is done already: what is left is its uses, not the rename
        keep_tests = bool(_KEEP_TESTS.search(text))
        places = tuple(_places(text))
        return cls(
            text=text,
            wants_change=is_change_request(text) and not _FAILING.search(text),  # the router's one rule
            wants_more=bool(_MORE.search(text)),
            tests_may_change=asks_to_change_tests(text),
            rename=rename,
            renamed=renamed,
            gone=tuple(dict.fromkeys(gone)),
            places=places,
            only_places=bool(places) and bool(re.search(r"\bonly\b", text, re.IGNORECASE)),
            keep_tests=keep_tests,
        )

    def read(self) -> list[str]:
        """What the request binds the fix to, in words (for the plan); empty when nothing."""
        lines = []
        if self.places:
            where = ", ".join(self.places)
            lines.append(f"the change goes {'only ' if self.only_places else ''}in {where}")
        for old, new in self.renamed:
            lines.append(f"{old} was renamed to {new} on purpose: its uses follow, {old} is not written back")
        for name in self.gone:
            if name not in {old for old, _ in self.renamed}:
                lines.append(f"{name} was removed on purpose: it is not written back")
        if self.keep_tests:
            lines.append("the tests stay as they are")
        return lines


def asks_to_change_tests(request: str) -> bool:
    """Whether the user asked for the tests themselves to change ("update the tests", "write a test"), and did not
    say to leave them ("fix it, don't change the tests")."""
    return bool(_TESTS_WANTED.search(request)) and not _KEEP_TESTS.search(request)


def _renamed(text: str) -> list[tuple[str, str]]:
    pairs = []
    for match in _RENAMED.finditer(text):
        old, new = match["old"] or match["old2"], match["new"] or match["new2"]
        if old != new and (old, new) not in pairs:
            pairs.append((old, new))
    return pairs


def _removed(text: str) -> list[str]:
    names = [match["one"] or match["two"] or match["three"] for match in _REMOVED.finditer(text)]
    return [name for name in names if name.lower() not in _PRONOUNS]


def _places(text: str) -> list[str]:
    """The paths the request names after a word that makes them the place of the change, within one clause
    ("update the callers in report.py and export.py"; not "apply_discount in shop/prices.py makes prices go up")."""
    from cortana.repair.testrun import is_test_file

    places: list[str] = []
    for match in PATH.finditer(text):
        path = match["path"].strip("./") if match["path"].startswith("./") else match["path"]
        before = text[: match.start()]
        clause_at = max((end.end() for end in _CLAUSE_END.finditer(before)), default=0)
        clause = before[clause_at:]
        if is_test_file(path) or not _PLACE_VERB.search(clause):
            continue
        if path not in places:
            places.append(path)
    return places

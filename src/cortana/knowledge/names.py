"""Which words of a prompt are names of code: the only words a graph lookup is done for.

A turn's prompt is mostly English. Looking every word up would put
``register`` or ``run`` (words that are also function names) into the
context of a prompt that only says "register me for the run", so a word
counts as a name only by its shape:

- a backticked word: ```lookup```, ```Agent.run_stream()```, ```pkg/store.py::load```;
- a call: ``run()``, ``build_app()``;
- a file name with a code or config extension: ``runtime.py``, ``src/app.ts``;
- a dotted identifier: ``Agent.run_stream``, ``os.path`` (not ``e.g``);
- snake case, a leading underscore or a dunder: ``load_defaults``, ``MAX_SIZE``, ``_private``, ``__init__``;
- camel case: ``SkillRegistry``, ``formatName``, ``HTTPServer``.

A capitalised word that is not the first of its sentence (``Agent`` in "what
depends on Agent?") is a *weak* name: it is looked up only in a graph that is
already in memory, and only matches a class of exactly that name. Everything
else, "hi" included, is not a name, so a prompt without names costs no
lookup at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CODE_EXTENSIONS", "MAX_NAMES", "Names", "names_in"]

MAX_NAMES = 8
"""The most names one prompt contributes (the rest are dropped, in order)."""

CODE_EXTENSIONS = frozenset(
    (
        *("py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts", "go", "rs", "java", "kt", "kts"),
        *("scala", "groovy", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "cs", "swift", "rb", "php", "lua"),
        *("zig", "ex", "exs", "jl", "f", "f90", "sh", "bash", "zsh", "ps1", "m", "mm", "v", "sv", "sql", "pas"),
        *("dart", "vue", "svelte", "r", "md", "rst", "toml", "yml", "yaml", "json", "ini", "cfg", "html", "css"),
        "scss",
    )
)
"""Extensions that make a word a file name (graphify's languages, and the files next to them)."""

_EXT = "|".join(sorted(CODE_EXTENSIONS, key=len, reverse=True))
_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_TOKEN = re.compile(r"^[\w./:-]+$")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\(\)")
_FILE = re.compile(rf"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXT}))(?![\w/-])", re.IGNORECASE)
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(])")
_WORD = re.compile(r"\b[A-Za-z_]\w*")
_SNAKE = re.compile(r"^_*[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)+_*$|^_+[A-Za-z]\w*$")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_CAPITALISED = re.compile(r"^[A-Z][a-z]+$")
_SENTENCE_ENDS = frozenset(".!?:;\n\"'*#>-")
MAX_SCANNED = 50_000
"""The most characters of a prompt that are searched for names (a pasted log is not a question)."""


@dataclass(frozen=True, slots=True)
class Names:
    """The names one prompt mentions, in the order they appear.

    Attributes:
        strong: words that are names by their shape (see the module docstring).
        weak: capitalised words inside a sentence; looked up only as exact class names.
    """

    strong: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.strong or self.weak)


def names_in(prompt: str) -> Names:
    """The code names ``prompt`` mentions (see the module docstring for what counts)."""
    if not prompt:
        return Names()
    prompt = prompt[:MAX_SCANNED]
    found: dict[str, None] = {}  # ordered set
    covered: list[tuple[int, int]] = []

    def add(name: str, span: tuple[int, int]) -> None:
        name = name.strip().rstrip(".:")
        if name.endswith("()"):
            name = name[:-2]
        if name and len(name) <= 200:
            found.setdefault(name, None)
        covered.append(span)

    for match in _BACKTICKED.finditer(prompt):
        inner = match.group(1).strip()
        if _TOKEN.match(inner.removesuffix("()")):
            add(inner, match.span())
    for pattern in (_CALL, _FILE):
        for match in pattern.finditer(prompt):
            if not _inside(match.span(), covered):
                add(match.group(1), match.span())
    for match in _DOTTED.finditer(prompt):
        if not _inside(match.span(), covered) and _is_dotted_name(match.group(1)):
            add(match.group(1), match.span())
    weak: dict[str, None] = {}
    for match in _WORD.finditer(prompt):
        word = match.group(0)
        if _inside(match.span(), covered):
            continue
        if _SNAKE.match(word) or _CAMEL.search(word):
            add(word, match.span())
        elif _CAPITALISED.match(word) and not _starts_sentence(prompt, match.start()):
            weak.setdefault(word, None)
    strong = tuple(found)[:MAX_NAMES]
    return Names(strong, tuple(w for w in weak if w not in found)[: MAX_NAMES - len(strong)])


def _inside(span: tuple[int, int], covered: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in covered)


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` is the first of its sentence (or line, or quote)."""
    index = start - 1
    while index >= 0 and text[index] in " \t":
        index -= 1
    return index < 0 or text[index] in _SENTENCE_ENDS


def _is_dotted_name(text: str) -> bool:
    """``Agent.run_stream`` and ``os.path`` are names; ``e.g`` and ``i.e`` are not."""
    return any(len(part) >= 3 for part in text.split("."))

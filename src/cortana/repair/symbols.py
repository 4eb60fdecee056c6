"""A small index of a Python project's definitions: where each function, method and class is, and what it calls.

Localizing a bug needs the call graph one step past what a failing test
shows: the test calls ``invoice_total``, which calls the broken ``tax_for``
in another file. :class:`SymbolIndex` reads each ``.py`` file of the
workspace once with :mod:`ast` (no code runs): its definitions with their
line spans, signatures, first docstring line, and the names each one calls
or uses. Files are bounded (at most ``MAX_FILES``, each at most
``MAX_FILE_BYTES``); a file that does not parse is skipped.
"""

from __future__ import annotations

import ast
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cortana.config import BUILD_OUTPUT_FOLDERS, NOT_PROJECT_FOLDERS
from cortana.repair.testrun import is_test_file

__all__ = ["MAX_FILES", "SKIPPED_FOLDERS", "Symbol", "SymbolIndex", "parse_quietly"]

MAX_FILES = 2_000
MAX_FILE_BYTES = 512 * 1024
SKIPPED_FOLDERS = NOT_PROJECT_FOLDERS | BUILD_OUTPUT_FOLDERS
"""The folders the index does not read: those that are not the project, and build output (a second copy of the
code's definitions); ``cortana.config`` says why each is there."""


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition.

    Attributes:
        name: its own name (``tax_for``).
        qualname: with its class (``Invoice.total``).
        file: its file, relative to the workspace (posix).
        start, end: its lines (1-based, decorators included).
        kind: ``function``, ``method`` or ``class``.
        signature: its first line, as written (``def tax_for(amount, rate=0.07):``).
        doc: its docstring's first line.
        calls: the names it calls or refers to (``foo()``, ``obj.bar()``, ``Baz``).
    """

    name: str
    qualname: str
    file: str
    start: int
    end: int
    kind: str
    signature: str
    doc: str = ""
    calls: frozenset[str] = frozenset()

    @property
    def is_test(self) -> bool:
        """Whether it is part of the tests."""
        return is_test_file(self.file)

    @property
    def where(self) -> str:
        """``file:line``."""
        return f"{self.file}:{self.start}"


@dataclass
class SymbolIndex:
    """The definitions of every Python file under ``root`` (see the module docstring)."""

    root: Path
    symbols: list[Symbol] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    """Each indexed file's text, by its relative path."""

    @classmethod
    def build(cls, root: Path) -> SymbolIndex:
        """Read every Python file under ``root`` (bounded)."""
        index = cls(root.resolve())
        for path in _python_files(index.root):
            relative = path.relative_to(index.root).as_posix()
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    continue
                text = path.read_text(encoding="utf-8")
                tree = parse_quietly(text, relative)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
                continue
            index.texts[relative] = text
            index.symbols += _definitions(tree, relative, text.splitlines())
        return index

    def with_files(self, files: Mapping[str, str]) -> SymbolIndex:
        """This index as it would be with ``files`` (relative path -> text) changed: those files read anew."""
        changed = SymbolIndex(self.root, [s for s in self.symbols if s.file not in files], dict(self.texts))
        for relative, text in files.items():
            changed.texts[relative] = text
            try:
                tree = parse_quietly(text, relative)
            except (SyntaxError, ValueError, RecursionError):
                continue
            changed.symbols += _definitions(tree, relative, text.splitlines())
        return changed

    def named(self, name: str) -> list[Symbol]:
        """The definitions called ``name`` (or ``Class.name``)."""
        return [s for s in self.symbols if name in (s.name, s.qualname)]

    def enclosing(self, file: str, line: int) -> Symbol | None:
        """The innermost definition in ``file`` whose lines hold ``line``."""
        found = [s for s in self.symbols if s.file == file and s.start <= line <= s.end]
        return min(found, key=lambda s: s.end - s.start) if found else None

    def in_file(self, file: str) -> list[Symbol]:
        """The definitions of ``file``, in order."""
        return sorted((s for s in self.symbols if s.file == file), key=lambda s: s.start)

    def source(self, symbol: Symbol) -> str:
        """A definition's text, as it is in its file."""
        lines = self.texts.get(symbol.file, "").splitlines()
        return "\n".join(lines[symbol.start - 1 : symbol.end])


def parse_quietly(text: str, filename: str = "<unknown>") -> ast.Module:
    """``text`` parsed, without the warnings a model's code can draw (``<unknown>:10: SyntaxWarning: invalid
    decimal literal`` on the user's terminal); a ``SyntaxError`` still raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=filename)


def _python_files(root: Path) -> Iterator[Path]:
    count = 0
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_FOLDERS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield Path(folder) / name


def _definitions(tree: ast.Module, file: str, lines: list[str]) -> list[Symbol]:
    found: list[Symbol] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                kind = "class" if isinstance(child, ast.ClassDef) else "method" if owner else "function"
                qualname = f"{owner}.{child.name}" if owner else child.name
                signature = lines[child.lineno - 1].strip() if child.lineno - 1 < len(lines) else child.name
                doc = (ast.get_docstring(child) or "").strip().splitlines()
                first_doc = doc[0][:200] if doc else ""
                calls = frozenset(_used_names(child))
                found.append(Symbol(child.name, qualname, file, start, end, kind, signature[:200], first_doc, calls))
                visit(child, qualname if isinstance(child, ast.ClassDef) else owner)

    visit(tree, None)
    return found


def _used_names(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            function = child.func
            if isinstance(function, ast.Name):
                yield function.id
            elif isinstance(function, ast.Attribute):
                yield function.attr
        elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            yield child.id

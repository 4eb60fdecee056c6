"""Whether a patch goes against what the request says, whatever the tests think of it.

The tests judge whether a patch works, not whether it is the change the user
asked for. Asked to update the callers of a function the user had renamed on
purpose, naming the file to change, a small model's patch put a function with
the old name back where it had been renamed: the tests passed, the rename was
undone and the named file was untouched. :func:`objection` reads a patch
against the request's binding words (:class:`~cortana.repair.request.
FixRequest`: the places it names, the names renamed or removed on purpose,
"don't change the tests") and says why it goes against them; the workflow
does not offer such a patch as the fix, and shows it only as an alternative
set aside, with the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from cortana.repair.patches import Patch
from cortana.repair.request import FixRequest
from cortana.repair.symbols import parse_quietly
from cortana.repair.testrun import is_test_file

__all__ = ["objection"]


def objection(request: FixRequest, patch: Patch, originals: Mapping[str, str]) -> str | None:
    """Why ``patch`` (its files' new texts; ``originals``: as they were) goes against ``request``, or None."""
    changed = sorted(patch.files)
    if request.keep_tests:
        tests = [path for path in changed if is_test_file(path)]
        if tests:
            return f"it changes {', '.join(tests)}, and the request says to leave the tests as they are"
    for name in request.gone:
        for path in changed:
            if name in _bound(patch.files[path]) and name not in _bound(originals.get(path, "")):
                why = next((f"was renamed to {new}" for old, new in request.renamed if old == name), "was removed")
                return f"it defines {name} again in {path}, and the request says {name} {why} on purpose"
    if request.places:
        named = [path for path in changed if _is_place(path, request.places)]
        if not named:
            return f"it changes {', '.join(changed)}, not {', '.join(request.places)}, where the request says to"
        if request.only_places and len(named) < len(changed):
            others = [path for path in changed if path not in named]
            only = ", ".join(request.places)
            return f"it also changes {', '.join(others)}, and the request says to change only {only}"
    return None


def _is_place(path: str, places: tuple[str, ...]) -> bool:
    """Whether the workspace path ``path`` is one the request named (``report.py`` names ``shop/report.py``)."""
    return any(path == place or path.endswith("/" + place.lstrip("/")) for place in places)


def _bound(text: str) -> set[str]:
    """The names a module binds at its top or in its classes: definitions, assignments, imports' local names."""
    if not text:
        return set()
    try:
        tree = parse_quietly(text)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names: set[str] = set()
    bodies = [tree.body] + [node.body for node in tree.body if isinstance(node, ast.ClassDef)]
    for body in bodies:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {target.id for target in targets if isinstance(target, ast.Name)}
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names

"""Skills: step-by-step instructions for a task, in ``SKILL.md`` files the model loads when it needs them.

A skill is a Markdown file named ``SKILL.md``: YAML front matter with a
``name`` and a one-line ``description``, then the instructions::

    ---
    name: release
    description: Cut a release - bump the version, tag it, build the wheel.
    ---
    1. Run `bump-my-version bump patch`.
    2. ...

:class:`SkillRegistry` finds them at start in the folders it is given (the
user's config folder's ``skills/``, then the workspace's ``skills/``: the
user's own skill wins over a workspace's of the same name), one
folder per skill: ``skills/<anything>/SKILL.md``, exactly one level down.
The model sees each skill's name and description in the system prompt
(:meth:`SkillRegistry.instructions`: sorted by name, no timestamps, so the
cached prompt prefix stays the same from turn to turn) and reads a skill's
full text on demand with the ``load_skill`` tool (:meth:`SkillRegistry.tools`).

A ``SKILL.md`` may come from a cloned repository, so everything in it is
untrusted and bounded: a file over 64 KiB, one that is not UTF-8 text, not a
regular file, or a link that leads out of the folder being scanned is skipped;
the name must be a short plain word; the description is cut to one line of at
most 300 characters with control and invisible characters removed; and the
tool shows at most 16,000 characters of a skill. A malformed file is reported
once (a :class:`SkillProblem` naming its path and what to fix, and one warning
on the ``cortana.skills`` logger) and skipped; the other skills still load.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from cortana.errors import ToolError
from cortana.models.base import loose_name
from cortana.prompts import as_data
from cortana.tools import Tool

__all__ = [
    "LOAD_SKILL",
    "MAX_DESCRIPTION_CHARS",
    "MAX_LOADED_CHARS",
    "MAX_SKILLS",
    "MAX_SKILL_BYTES",
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "SkillProblem",
    "SkillRegistry",
    "clean_description",
    "parse_skill",
    "render_skill",
]

logger = logging.getLogger("cortana.skills")

SKILL_FILE = "SKILL.md"
"""The name of a skill's file, inside a folder of its own under a scanned ``skills/`` folder."""
LOAD_SKILL = "load_skill"
"""The name of the tool that shows the model a skill's instructions."""
MAX_SKILL_BYTES = 64 << 10
"""The largest ``SKILL.md`` read (64 KiB); a larger one is skipped."""
MAX_DESCRIPTION_CHARS = 300
"""A longer description is cut, ending in "…"."""
MAX_LOADED_CHARS = 16_000
"""The most characters of a skill's instructions ``load_skill`` shows."""
MAX_SKILLS = 64
"""The most skills loaded in all (each costs prompt tokens every turn); the rest are reported and skipped."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FENCE = "---"
_HEADER = "Skills (step-by-step instructions for tasks; call load_skill with the name before doing one of these):"
_REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
"""Control characters, invisible format characters (bidi overrides, tag characters, zero widths) and surrogates."""


class SkillError(ValueError):
    """A malformed ``SKILL.md`` or skill; ``str(error)`` says what is wrong and how to fix it."""


def clean_description(text: str) -> str:
    """``text`` as one line: whitespace runs become one space, control and invisible characters go, cut to 300."""
    kept = "".join(
        " " if char.isspace() else "" if unicodedata.category(char) in _REMOVED_CATEGORIES else char for char in text
    )
    line = " ".join(kept.split())
    if len(line) > MAX_DESCRIPTION_CHARS:
        line = line[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return line


def _check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        shown = repr(name) if len(name) <= 80 else repr(name[:80]) + "…"
        raise SkillError(
            f"the name {shown} is not allowed: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (for example 'name: release-notes')"
        )
    return name


@dataclass(frozen=True)
class Skill:
    """One skill: a name, a one-line description the model always sees, and the instructions it loads.

    Constructing one checks and cleans its fields as :func:`parse_skill` does: the
    name must be 1-64 letters, digits, ``_``, ``.`` or ``-`` (starting with a letter
    or digit), the description is made one line of at most 300 characters, and the
    body is stripped and must not be empty; a :class:`SkillError` says what is wrong.

    Attributes:
        name: the name the model passes to ``load_skill``.
        description: what the skill is for, on one line.
        body: the Markdown instructions after the front matter, stripped.
        path: the ``SKILL.md`` it was read from (None for one made in code).
    """

    name: str
    description: str
    body: str
    path: Path | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        description = clean_description(self.description)
        if not description:
            raise SkillError(
                "the description is empty: write one line saying what the skill does "
                "(for example 'description: Cut a release - bump the version and tag it.')"
            )
        body = self.body.strip()
        if not body:
            raise SkillError(
                "there are no instructions after the front matter: write the steps below the closing '---'"
            )
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "body", body)


@dataclass(frozen=True)
class SkillProblem:
    """A ``SKILL.md`` that was skipped, and why.

    Attributes:
        path: the file (or folder) at fault.
        reason: what is wrong with it, in plain words that say how to fix it.
    """

    path: Path
    reason: str


def _too_large(size: int) -> str:
    return f"larger than 64 KiB ({size:,} bytes): shorten the instructions or split them into several skills"


def parse_skill(text: str, path: Path | None = None) -> Skill:
    """Parse the text of a ``SKILL.md`` (read from ``path``, when given).

    Raises:
        SkillError: naming what is wrong: no front matter, front matter not closed or
            not valid YAML or not a mapping, ``name`` or ``description`` missing or not
            text, a name that is not allowed, no instructions, or a text over 64 KiB.
    """
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SKILL_BYTES:
        raise SkillError(_too_large(size))
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != _FENCE:
        raise SkillError(
            "there is no front matter: start the file with a line '---', then 'name:' and 'description:' lines, "
            "then another '---' line, then the instructions"
        )
    end = next((index for index in range(1, len(lines)) if lines[index].rstrip() == _FENCE), None)
    if end is None:
        raise SkillError("the front matter is not closed: add a line '---' after the 'name:' and 'description:' lines")
    front = _front_matter("\n".join(lines[1:end]))
    name = _text_field(front, "name", "name: release-notes")
    description = _text_field(front, "description", "description: Write the release notes from the changelog.")
    return Skill(name=name, description=description, body="\n".join(lines[end + 1 :]), path=path)


def _front_matter(source: str) -> dict[object, object]:
    try:
        data: object = yaml.safe_load(source)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark else ""  # +2: after the first '---'
        raise SkillError(f"the front matter is not valid YAML{where}: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise SkillError(f"the front matter is not valid YAML: {exc}") from None
    except RecursionError:
        raise SkillError(
            "the front matter is nested too deeply to read: keep it to 'name:' and 'description:'"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillError(
            f"the front matter must be a mapping of keys to values ('name: ...' and 'description: ...' lines), "
            f"not a {type(data).__name__}"
        )
    return data


def _text_field(front: dict[object, object], key: str, example: str) -> str:
    if key not in front or front[key] is None:
        raise SkillError(f"the front matter has no '{key}:': add a line such as '{example}'")
    value = front[key]
    if not isinstance(value, str):
        raise SkillError(f"'{key}' must be text, not {type(value).__name__}: put it in quotes, e.g. {key}: \"...\"")
    return value


def render_skill(skill: Skill) -> str:
    """The ``SKILL.md`` text of ``skill``: its name and description as YAML front matter, then its body.

    ``parse_skill(render_skill(skill), skill.path) == skill``.

    Raises:
        SkillError: the text would be larger than 64 KiB, so it could not be read back.
    """
    front = yaml.safe_dump(
        {"name": skill.name, "description": skill.description},
        sort_keys=False,
        allow_unicode=True,
        width=MAX_DESCRIPTION_CHARS * 4,  # one line: no folding of a long description
    )
    text = f"{_FENCE}\n{front}{_FENCE}\n{skill.body}\n"
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_SKILL_BYTES:
        raise SkillError(_too_large(size))
    return text


class SkillRegistry:
    """The skills found in ``folders`` (each one's ``*/SKILL.md``), read once, at construction.

    A folder that does not exist holds no skills. Where two skills have the same
    name (case, ``-``, ``_`` and ``.`` aside), the one found first wins (earlier
    folders first, and within a folder the skill folders in name order) and the
    other is a problem; links to one ``SKILL.md`` (inside the folder) read it once.
    Folders whose names start with ``.`` are not looked in.

    Args:
        folders: the ``skills/`` folders to look in, most important first: the user's own (their config
            folder's), then the workspace's, so that a repository cannot replace a skill the user wrote.

    Attributes:
        skills: the skills, sorted by name.
        problems: one per ``SKILL.md`` that was skipped, in the order found; each was logged once.
    """

    def __init__(self, folders: Sequence[Path]) -> None:
        self.skills: list[Skill] = []
        self.problems: list[SkillProblem] = []
        self._by_name: dict[str, Skill] = {}
        self._by_loose_name: dict[str, Skill] = {}
        self._files: set[Path] = set()
        scanned: set[Path] = set()
        for folder in folders:
            root = Path(folder).resolve()
            if root in scanned:
                continue  # the same folder twice (the workspace is the config folder): not duplicates
            scanned.add(root)
            if not self._scan(Path(folder), root):
                break
        self.skills.sort(key=lambda skill: (skill.name.lower(), skill.name))

    def _scan(self, folder: Path, root: Path) -> bool:
        """Add the skills of one folder; False once ``MAX_SKILLS`` stopped the scan."""
        if not root.is_dir():
            return True
        try:
            entries = sorted(os.listdir(root))
        except OSError as exc:
            self._problem(folder, f"the folder cannot be read: {exc.strerror or exc}")
            return True
        for entry in entries:
            if entry.startswith("."):
                continue
            candidate = folder / entry / SKILL_FILE
            if not os.path.lexists(candidate):
                continue  # a plain file, or a folder without a SKILL.md: not a skill
            if len(self.skills) >= MAX_SKILLS:
                self._problem(
                    candidate,
                    f"skipped: at most {MAX_SKILLS} skills are loaded; remove some you do not use from {folder}",
                )
                return False
            try:
                real = candidate.resolve()
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop, on Python before 3.13
                self._problem(candidate, "a link that loops back on itself: replace it with the file")
                continue
            if not real.is_relative_to(root):
                self._problem(candidate, f"a link out of {folder}: skills are read only from inside the folder")
                continue
            if real in self._files:
                continue  # a link to a SKILL.md already read: the same skill, not a duplicate
            self._files.add(real)
            try:
                skill = parse_skill(_read(real), candidate)
            except SkillError as exc:
                self._problem(candidate, str(exc))
                continue
            self._add(skill, candidate)
        return True

    def _add(self, skill: Skill, path: Path) -> None:
        loose = loose_name(skill.name)
        first = self._by_loose_name.get(loose)
        if first is not None:
            self._problem(path, f"the skill {first.name} at {first.path} has this name and comes first")
            return
        self._by_name[skill.name] = skill
        self._by_loose_name[loose] = skill
        self.skills.append(skill)

    def _problem(self, path: Path, reason: str) -> None:
        self.problems.append(SkillProblem(path, reason))
        logger.warning("Skill %s skipped: %s", path, reason)

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``: exactly, else ignoring case and ``-`` / ``_`` / ``.``; None if none."""
        return self._by_name.get(name) or self._by_loose_name.get(loose_name(name))

    def names(self) -> list[str]:
        """The skills' names, sorted."""
        return [skill.name for skill in self.skills]

    def load(self, name: str) -> str:
        """What ``load_skill`` shows for ``name``: a line naming the skill, then its instructions (bounded).

        Raises:
            ToolError: no skill has that name; the message lists the names there are.
        """
        skill = self.get(name)
        if skill is None:
            shown = name if len(name) <= 80 else name[:80] + "…"
            raise ToolError(
                f"No skill named '{shown}'. Skills: {', '.join(self.names()) or '(none)'}. "
                f"Call {LOAD_SKILL} again with one of these names.",
                tool_name=LOAD_SKILL,
            )
        where = f" (from {skill.path})" if skill.path is not None else ""
        body = skill.body
        if len(body) > MAX_LOADED_CHARS:
            body = (
                body[:MAX_LOADED_CHARS]
                + f"\n[... skill cut at {MAX_LOADED_CHARS:,} of {len(skill.body):,} characters; shorten its SKILL.md]"
            )
        return f"Skill {skill.name}{where}:\n{body}"

    def instructions(self) -> str:
        """The skills block of the system prompt: each skill's name and description; "" with no skills.

        The same skills always give the same text (sorted by name, nothing that changes
        from turn to turn), so the prompt prefix stays cached.
        """
        if not self.skills:
            return ""
        listed = as_data("\n".join(f"- {skill.name}: {skill.description}" for skill in self.skills))
        return f"{_HEADER}\n{listed}"  # a repository's descriptions, in the system prompt: data, never tokens

    def tools(self) -> list[Tool]:
        """``[load_skill]``, the read-only tool that shows the model a skill's instructions; ``[]`` with no skills."""
        if not self.skills:
            return []

        async def load_skill(name: str) -> str:
            """Load a skill's instructions.

            Args:
                name: the skill's name, as listed under Skills in your instructions.
            """
            return self.load(name)

        return [
            Tool(
                load_skill,
                name=LOAD_SKILL,
                description=(
                    "Load the full step-by-step instructions of a skill, to follow them. "
                    "The name is one of those listed under Skills in your instructions."
                ),
                read_only=True,
            )
        ]

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills)


def _read(path: Path) -> str:
    """The UTF-8 text of the regular file ``path`` (already resolved), at most 64 KiB; else a SkillError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)  # NONBLOCK: a FIFO must not hang
    except OSError as exc:
        raise SkillError(f"it cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SkillError("not a regular file: a skill's SKILL.md must be a plain text file")
        data = handle.read(MAX_SKILL_BYTES + 1)
    if len(data) > MAX_SKILL_BYTES:
        raise SkillError(_too_large(max(info.st_size, len(data))))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(f"not UTF-8 text (byte {exc.start}): save it as UTF-8") from None

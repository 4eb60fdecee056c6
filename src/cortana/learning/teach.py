"""Teach mode: the user does a task by hand while Cortana watches, then the model drafts a ``SKILL.md`` from it.

A :class:`TeachSession` records what the user does in the terminal assistant
between ``/teach [name]`` and ``/teach done``:

* the ``!`` shell commands they run, with the exit code and the head of the
  output (:meth:`TeachSession.record_command`);
* free-text notes (:meth:`TeachSession.record_note`);
* the files they change in the workspace: the session takes a
  :class:`~cortana.learning.snapshot.WorkspaceSnapshot` when it starts and
  :meth:`TeachSession.file_changes` compares it with the workspace as it is now
  (added, modified and deleted files, with a unified diff for text files; which
  files are watched, and how, is said in :mod:`cortana.learning.snapshot`).

:meth:`TeachSession.draft` sends all of it to the model with the
``teach_draft`` prompt and parses the answer into a :class:`~cortana.learning.skills.Skill`;
:func:`save_skill` writes it under ``<folder>/skills/<name>/SKILL.md`` once the
user says yes. Nothing here writes anything else.

Everything recorded is untrusted text on its way into a prompt, so all of it is
bounded: at most 5,000 files are watched, a file over 256 KiB or a binary file
is compared by size, time and hash only, a command's output is cut to its first
20 lines / 2,000 characters, the diffs to 20,000 characters in all, and the
prompt to about 12,000 characters (the newest events kept). Nothing recorded is
ever run.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from cortana.errors import CortanaError, UserError
from cortana.learning.skills import SKILL_FILE, Skill, SkillError, parse_skill, render_skill
from cortana.learning.snapshot import (
    MAX_DIFF_CHARS,
    MAX_FILES,
    MAX_TEXT_FILE_BYTES,
    FileChange,
    WorkspaceSnapshot,
    clean_text,
    cut_lines,
    cut_text,
)
from cortana.messages import Message
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, complete
from cortana.prompts import prompt_text
from cortana.safefs import PathRefused, SafeTree

__all__ = [
    "MAX_DIFF_CHARS",
    "MAX_FILES",
    "MAX_OUTPUT_CHARS",
    "MAX_OUTPUT_LINES",
    "MAX_PROMPT_CHARS",
    "MAX_TEXT_FILE_BYTES",
    "FileChange",
    "RecordedCommand",
    "RecordedNote",
    "TeachError",
    "TeachEvent",
    "TeachSession",
    "normalize_skill_name",
    "save_skill",
    "skill_file",
    "skill_text",
]

MAX_OUTPUT_LINES = 20
"""The most lines of a command's output kept."""
MAX_OUTPUT_CHARS = 2_000
"""The most characters of a command's output kept."""
MAX_PROMPT_CHARS = 12_000
"""About the most characters of the drafting prompt, so it fits a small model's 8k-token window."""

_MAX_COMMAND_CHARS = 1_000
_MAX_NOTE_CHARS = 2_000

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NAME_DISALLOWED = re.compile(r"[^A-Za-z0-9_.-]+")

_RETRY = (
    "That answer is not a valid SKILL.md: {reason}.\n"
    "Write the whole SKILL.md again, and nothing else: a line `---`, a line `name: short-kebab-name`, "
    "a line `description: one line saying what it does and when to use it`, a line `---`, "
    "then the numbered steps."
)


class TeachError(CortanaError):
    """The model could not draft a usable skill (or there was nothing to draft from); the message says why.

    Attributes:
        reason: what was wrong with the model's last draft ("" when there was none).
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class RecordedCommand:
    """A ``!`` shell command the user ran while teaching.

    Attributes:
        command: the command line (cut to 1,000 characters).
        exit_code: its exit status.
        output_head: the first 20 lines / 2,000 characters of its output, terminal escapes
            removed; a last line in brackets says how much was cut.
        at: when it was recorded (the session's clock, seconds).
    """

    command: str
    exit_code: int
    output_head: str
    at: float


@dataclass(frozen=True)
class RecordedNote:
    """A free-text note the user wrote while teaching.

    Attributes:
        text: the note (cut to 2,000 characters).
        at: when it was recorded (the session's clock, seconds).
    """

    text: str
    at: float


TeachEvent = RecordedCommand | RecordedNote
"""One thing recorded in a teach session, in the order it happened."""


def normalize_skill_name(name: str) -> str:
    """``name`` in the form a skill's name must have: letters, digits, ``_``, ``.``, ``-``; at most 64.

    Other characters (spaces, slashes) become ``-``; ``..`` becomes ``.``; it starts with a
    letter or digit. Returns "" when nothing usable is left.
    """
    text = _NAME_DISALLOWED.sub("-", name.strip())
    text = re.sub(r"\.{2,}", ".", text)
    text = re.sub(r"-{2,}", "-", text)
    text = re.sub(r"^[^A-Za-z0-9]+", "", text)[:64]
    return text.rstrip("-.")


class TeachSession:
    """Records a task the user does by hand, and drafts a skill from it.

    Creating one takes the "before" snapshot of ``workspace`` at once (a
    :class:`~cortana.learning.snapshot.WorkspaceSnapshot`, synchronously: a ``git
    ls-files`` or a folder walk, and reading the files up to 256 KiB).

    Args:
        workspace: the folder the user works in.
        name: the name the user wants for the skill; normalized with :func:`normalize_skill_name`.
        clock: the time source for the events' ``at``.

    Raises:
        UserError: ``name`` has nothing usable in it.

    Attributes:
        name: the skill's name the user gave (normalized), or None.
        workspace: the folder being watched.
        events: the commands and notes recorded, in order.
    """

    def __init__(self, workspace: Path, name: str | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.workspace = Path(workspace).resolve()
        self.name: str | None = None
        if name is not None and name.strip():
            normalized = normalize_skill_name(name)
            if not normalized:
                raise UserError(
                    f"'{name[:80]}' cannot be a skill's name: use letters, digits and '-' (for example 'deploy-docs')"
                )
            self.name = normalized
        self.events: list[RecordedCommand | RecordedNote] = []
        self._clock = clock
        self._snapshot = WorkspaceSnapshot(self.workspace)

    # -- recording ----------------------------------------------------------------------------

    def record_command(self, command: str, exit_code: int, output: str) -> None:
        """Record a shell command, its exit code and the head of its output (20 lines / 2,000 characters)."""
        self.events.append(
            RecordedCommand(
                command=cut_text(clean_text(command).strip(), _MAX_COMMAND_CHARS),
                exit_code=int(exit_code),
                output_head=_output_head(output),
                at=self._clock(),
            )
        )

    def record_note(self, text: str) -> None:
        """Record a free-text note (cut to 2,000 characters)."""
        self.events.append(RecordedNote(text=cut_text(clean_text(text).strip(), _MAX_NOTE_CHARS), at=self._clock()))

    @property
    def empty(self) -> bool:
        """True when nothing was recorded and no file changed."""
        return not self.events and not self.file_changes()

    # -- comparing ----------------------------------------------------------------------------

    def file_changes(self) -> list[FileChange]:
        """The files that differ between the start of the session and now, by path.

        Added, modified and deleted files are listed, unchanged ones are not. The diffs
        come to at most 20,000 characters in all; past that, a change's diff is a note
        saying it was left out.
        """
        return self._snapshot.changes()

    # -- drafting -----------------------------------------------------------------------------

    def draft_prompt(self) -> str:
        """The text sent to the model: the ``teach_draft`` prompt with the name, the events and the file changes.

        Bounded to about 12,000 characters: the oldest events and the end of the diffs go first.
        """
        return self._prompt(self.file_changes())

    def _prompt(self, changes: list[FileChange]) -> str:
        template = prompt_text("teach_draft")
        name_hint = (
            f"The user named this skill `{self.name}`: write `name: {self.name}` in the front matter.\n"
            if self.name
            else ""
        )
        fixed = len(template.format(name_hint=name_hint, events="", changes=""))
        budget = max(MAX_PROMPT_CHARS - fixed, 2_000)
        blocks = [_render_event(number, event) for number, event in enumerate(self.events, start=1)]
        changes_text = _render_changes(changes)
        events_length = sum(len(block) + 1 for block in blocks)
        changes_budget = min(len(changes_text), max(budget - events_length, budget // 2))
        events_text = _newest(blocks, budget - changes_budget)
        return template.format(
            name_hint=name_hint, events=events_text, changes=cut_lines(changes_text, changes_budget, what="changes")
        )

    async def draft(self, client: ModelClient) -> Skill:
        """Ask the model for a ``SKILL.md`` drafted from what was recorded, and parse it.

        One model call; when the answer is not a valid ``SKILL.md``, one more, quoting
        what was wrong. A name the user gave replaces the drafted one. The skill is not
        saved: see :func:`save_skill`.

        Raises:
            TeachError: nothing was recorded, or both answers were not valid ``SKILL.md`` text.
            ModelError: the engine failed.
        """
        changes = await asyncio.to_thread(self.file_changes)
        if not self.events and not changes:
            raise TeachError(
                "Nothing was recorded to draft a skill from: run the task's commands with '!', "
                "write notes, or change files first (or cancel teach mode)."
            )
        messages = [Message.user(self._prompt(changes))]
        settings = ModelSettings(temperature=0.2, max_tokens=1024)
        reason = ""
        for _ in range(2):
            response = await complete(client, ModelRequest(messages=list(messages), settings=settings))
            reply = response.message.content
            try:
                skill = parse_skill(skill_text(reply))
                name = self.name or normalize_skill_name(skill.name)
                return replace(skill, name=name) if name != skill.name else skill
            except SkillError as exc:
                reason = str(exc)
            messages += [Message.assistant(reply), Message.user(_RETRY.format(reason=reason))]
        raise TeachError(
            f"The model did not write a valid SKILL.md after two tries: {reason}. "
            "Run /teach done again, or write the skill by hand.",
            reason=reason,
        )


def skill_text(reply: str) -> str:
    """The ``SKILL.md`` inside a model's reply: from the first ``---`` line, without a fence around it.

    Text before the first ``---`` line (a sentence, an opening fence such as
    ```` ```markdown ````) is dropped, and so is an unmatched closing fence and what follows it.
    A reply without a ``---`` line is returned stripped, for :func:`parse_skill` to say what is wrong.
    """
    lines = reply.strip().replace("\r\n", "\n").split("\n")
    start = next((index for index, line in enumerate(lines) if line.strip() == "---"), None)
    if start is None:
        return reply.strip()
    body = lines[start:]
    body[0] = "---"
    fences = [index for index, line in enumerate(body) if line.strip().startswith("```")]
    if len(fences) % 2 == 1 and body[fences[-1]].strip() == "```":
        body = body[: fences[-1]]
    return "\n".join(body).strip() + "\n"


# -- saving -----------------------------------------------------------------------------------


def skill_file(folder: Path, name: str) -> Path:
    """Where the skill ``name`` lives under ``folder``: ``folder / "skills" / name / "SKILL.md"``.

    Raises:
        UserError: ``name`` is empty, or holds a path separator, ``..`` or a control character.
    """
    if (
        not name
        or name in (".", "..")
        or ".." in name
        or "/" in name
        or "\\" in name
        or _CONTROL.search(name)
        or name != name.strip()
    ):
        raise UserError(
            f"{name[:80]!r} cannot be a skill's folder name: use letters, digits, '-', '_' or '.', "
            "without '/', '\\' or '..' (for example 'deploy-docs')"
        )
    return Path(folder) / "skills" / name / SKILL_FILE


def save_skill(folder: Path, skill: Skill, *, overwrite: bool = False) -> Path:
    """Write ``skill`` as ``folder/skills/<name>/SKILL.md`` and return that path.

    The folders are made as needed, through Cortana's one writer (:class:`cortana.safefs.SafeTree`): a symlink
    on the way (``skills/`` swapped for a link out of the folder) is refused, never followed. An existing file is
    replaced only with ``overwrite`` (atomically; a symlink there is refused).

    Raises:
        UserError: the file exists and ``overwrite`` is false, the name cannot be a folder name, or a symlink is on
            the way.
        SkillError: the skill's text would be over 64 KiB.
    """
    path = skill_file(folder, skill.name)
    text = render_skill(skill).encode("utf-8")
    tree = SafeTree(folder)
    relative = path.relative_to(folder)
    try:
        tree.write_bytes(relative, text, exclusive=not overwrite, shown=str(path))
    except FileExistsError:
        raise UserError(
            f"{path} exists already: pick another name for the skill, or pass overwrite=True to replace it."
        ) from None
    except PathRefused as refused:
        raise UserError(f"{refused}; the skill was not saved") from None
    return path


# -- text ---------------------------------------------------------------------------------------


def _output_head(output: str) -> str:
    text = clean_text(output).rstrip()
    lines = text.split("\n") if text else []
    head = "\n".join(lines[:MAX_OUTPUT_LINES])
    if len(head) > MAX_OUTPUT_CHARS:
        head = head[:MAX_OUTPUT_CHARS]
    kept = head.count("\n") + 1 if head else 0
    if len(head) < len(text):
        more = len(lines) - kept
        head += f"\n[... output cut: {more} more lines]" if more else "\n[... output cut]"
    return head


def _indent(text: str, prefix: str = "   | ") -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


def _render_event(number: int, event: TeachEvent) -> str:
    if isinstance(event, RecordedNote):
        return f"{number}. Note from the user:\n{_indent(event.text)}"
    outcome = "succeeded" if event.exit_code == 0 else "failed"
    lines = [f"{number}. Ran: {event.command}", f"   Exit code: {event.exit_code} ({outcome})"]
    if event.output_head:
        lines += ["   Output (start):", _indent(event.output_head)]
    else:
        lines.append("   Output: (none)")
    return "\n".join(lines)


def _render_changes(changes: Iterable[FileChange]) -> str:
    blocks = [f"{change.status}: {change.path}\n{change.diff}".rstrip() for change in changes]
    return "\n\n".join(blocks) if blocks else "(no files changed)"


def _newest(blocks: list[str], budget: int) -> str:
    """The newest ``blocks`` that fit ``budget`` characters, in order, after a line saying how many were left out."""
    if not blocks:
        return "(no commands or notes)"
    kept: list[str] = []
    used = 0
    for block in reversed(blocks):
        if used + len(block) + 1 > budget:
            if not kept:  # the newest alone is too long: cut it
                kept.append(cut_lines(block, max(budget - 60, 200), what="event"))
            break
        kept.append(block)
        used += len(block) + 1
    kept.reverse()
    left_out = len(blocks) - len(kept)
    if left_out:
        kept.insert(0, f"({left_out} earlier events left out to keep this short)")
    return "\n".join(kept)

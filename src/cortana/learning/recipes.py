"""Recipes: what a run did, distilled into TASK, STEPS and AVOID, and the files it relied on.

A recipe is written by the model after a run (:func:`distill_prompt` shows it
the trace; :func:`parse_recipe` reads its answer) and shown before a similar
prompt later (:func:`render_recipe`). Small models answer the distilling
prompt loosely, so parsing is forgiving, and when their answer has no steps the
recipe falls back to the calls that worked, taken from the trace itself.

The files a recipe relies on are fingerprinted (size, modification time and a
SHA-256 of the content) so that a later turn can name the ones that changed.
Everything here reads the model's and the tools' text: it is bounded before it
is stored or shown.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortana.display import printable
from cortana.messages import Message, RunResult, ToolCall
from cortana.prompts import prompt_text

__all__ = [
    "FileFingerprint",
    "Recipe",
    "changed_files",
    "distill_prompt",
    "fingerprint",
    "is_correction",
    "parse_recipe",
    "relied_on",
    "render_recipe",
    "render_trace",
]

MAX_TASK_CHARS = 300
MAX_STEPS = 8
MAX_AVOID = 5
MAX_ITEM_CHARS = 240
MAX_TRACE_CHARS = 6_000
"""The most trace text one distilling prompt holds (its newest part): a small model's window is small."""
MAX_FILES = 12
MAX_COMMANDS = 6
HASH_LIMIT_BYTES = 2_000_000
"""Files up to this size are compared by content; larger ones by size and modification time only."""
PATH_ARGUMENTS = ("path", "file", "filename", "file_path", "target")
COMMAND_ARGUMENTS = ("command", "cmd")


@dataclass(frozen=True, slots=True)
class FileFingerprint:
    """What a file was like when a recipe was written: its workspace-relative path, size, mtime and hash."""

    path: str
    size: int
    mtime_ns: int
    sha256: str | None

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileFingerprint:
        """Read :meth:`as_json`'s form back (bad data raises ``KeyError``/``TypeError``/``ValueError``)."""
        sha = data.get("sha256")
        return cls(str(data["path"]), int(data["size"]), int(data["mtime_ns"]), str(sha) if sha else None)


@dataclass(frozen=True, slots=True)
class Recipe:
    """A shortcut for a task: what it was, the steps that worked, what to avoid, what it relies on.

    Attributes:
        task: the task in general words, naming its target (embedded to find the recipe again).
        steps: the steps that got to the answer, in order.
        avoid: calls that failed or wasted time, and why.
        files: fingerprints of the files the run read or changed.
        commands: the commands the run ran.
    """

    task: str
    steps: tuple[str, ...]
    avoid: tuple[str, ...] = ()
    files: tuple[FileFingerprint, ...] = ()
    commands: tuple[str, ...] = ()


# -- the trace and the distilling prompt ----------------------------------------------------------


def _bounded(text: str, limit: int) -> str:
    text = " ".join(printable(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_text(call: ToolCall) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False) if call.arguments else (call.raw_arguments or "{}")
    return f"{call.name}({_bounded(arguments, 200)})"


def render_trace(result: RunResult) -> str:
    """The run as lines a model can read: each call, its result's head (errors marked), the answer's head."""
    lines: list[str] = []
    calls: dict[str, ToolCall] = {}
    for message in result.new_messages[1:]:
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                calls[call.id] = call
                lines.append(f"CALL {_call_text(call)}")
        elif message.role == "tool":
            mark = "ERROR" if message.is_error else "RESULT"
            lines.append(f"  {mark}: {_bounded(message.content, 300)}")
        elif message.role == "assistant" and message.content.strip() and message is result.new_messages[-1]:
            lines.append(f"ANSWER: {_bounded(message.content, 500)}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_TRACE_CHARS else "[… earlier calls left out]\n" + text[-MAX_TRACE_CHARS:]


def distill_prompt(result: RunResult) -> str:
    """The prompt that asks the model to distill ``result`` into a recipe (``prompts/distill.md``)."""
    return prompt_text("distill").format(prompt=_bounded(result.prompt, 600), trace=render_trace(result))


# -- reading the model's recipe -------------------------------------------------------------------

_HEADING = re.compile(r"^\W*(task|steps|avoid)\W*:?\s*(.*)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_NOTHING = re.compile(r"^(nothing|none|n/?a|-)\W*$", re.IGNORECASE)


def parse_recipe(reply: str, result: RunResult) -> Recipe:
    """The recipe in the model's ``reply`` to :func:`distill_prompt`, completed from the trace where it is lacking.

    Without a TASK line the task is the user's prompt; without steps they are the calls that
    worked, in order; AVOID always lists the calls that failed when the model named none.
    """
    sections: dict[str, list[str]] = {"task": [], "steps": [], "avoid": []}
    current: str | None = None
    for raw in reply.replace("**", "").splitlines():
        line = raw.strip().strip("`").strip()
        if not line:
            continue
        heading = _HEADING.match(line)
        if heading and heading.group(1).lower() in sections and (":" in line or not heading.group(2)):
            current = heading.group(1).lower()
            rest = heading.group(2).strip()
            if rest:
                sections[current].append(rest)
            continue
        if current is not None:
            sections[current].append(line)
    task = _bounded(" ".join(sections["task"]), MAX_TASK_CHARS) or _bounded(result.prompt, MAX_TASK_CHARS)
    failed = _failed_calls(result)
    # The 1.5B model copies calls from the trace into STEPS, failed ones included (a fix "edit_file on
    # invoicing/bulk_discount_rate.txt", a file that does not exist, listed as a step and under AVOID).
    steps = _items([s for s in sections["steps"] if not any(call in s for call in failed)], MAX_STEPS)
    steps = steps or _calls_that_worked(result)
    avoid = _items(sections["avoid"], MAX_AVOID) or _calls_that_failed(result)
    return Recipe(
        task=task,
        steps=steps,
        avoid=avoid,
        files=(),
        commands=tuple(_commands(result)),
    )


def _items(lines: Iterable[str], limit: int) -> tuple[str, ...]:
    items: list[str] = []
    for line in lines:
        item = _BULLET.sub("", line).strip()
        if item and not _NOTHING.match(item) and item not in items:
            items.append(_bounded(item, MAX_ITEM_CHARS))
    return tuple(items[:limit])


def _pairs(result: RunResult) -> list[tuple[ToolCall, Message]]:
    """Each call of the run with its result, in order."""
    results = {m.tool_call_id: m for m in result.new_messages if m.role == "tool"}
    return [
        (call, results[call.id])
        for message in result.new_messages
        if message.role == "assistant"
        for call in message.tool_calls
        if call.id in results
    ]


def _calls_that_worked(result: RunResult) -> tuple[str, ...]:
    steps: list[str] = []
    for call, outcome in _pairs(result):
        step = _call_text(call)
        if not outcome.is_error and step not in steps:
            steps.append(step)
    return tuple(steps[:MAX_STEPS])


def _failed_calls(result: RunResult) -> list[str]:
    """The text of each call that failed, as :func:`render_trace` shows it (to recognise it copied into STEPS)."""
    return [_call_text(call) for call, outcome in _pairs(result) if outcome.is_error]


def _calls_that_failed(result: RunResult) -> tuple[str, ...]:
    avoid: list[str] = []
    for call, outcome in _pairs(result):
        if outcome.is_error:
            reason = outcome.content.strip().splitlines()[0] if outcome.content.strip() else "it failed"
            item = _bounded(f"{_call_text(call)}: {reason}", MAX_ITEM_CHARS)
            if item not in avoid:
                avoid.append(item)
    return tuple(avoid[:MAX_AVOID])


def _commands(result: RunResult) -> list[str]:
    commands: list[str] = []
    for call, _ in _pairs(result):
        for key in COMMAND_ARGUMENTS:
            value = call.arguments.get(key)
            if isinstance(value, str) and value.strip() and value not in commands:
                commands.append(_bounded(value, 200))
    return commands[:MAX_COMMANDS]


# -- the files a recipe relies on -----------------------------------------------------------------


def relied_on(result: RunResult, workspace: Path) -> list[str]:
    """The workspace files the run's calls named (read, searched in or changed), relative, in order; at most a few.

    Only regular files inside ``workspace`` count: a path the model made up, or one that leads
    out of the workspace, is left out.
    """
    root = workspace.resolve()
    found: list[str] = []
    for call, _ in _pairs(result):
        for key in PATH_ARGUMENTS:
            value = call.arguments.get(key)
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                continue
            try:
                path = (root / value).resolve()
                relative = path.relative_to(root).as_posix()
            except (OSError, ValueError):
                continue
            if path.is_file() and relative not in found:
                found.append(relative)
    return found[:MAX_FILES]


def _inside(workspace: Path, relative: str) -> Path | None:
    """``workspace / relative`` when it stays inside the workspace (an imported recipe's paths are untrusted)."""
    try:
        root = workspace.resolve()
        path = (root / relative).resolve()
        path.relative_to(root)
    except (OSError, ValueError):
        return None
    return path


def fingerprint(workspace: Path, relative: str) -> FileFingerprint | None:
    """The file's fingerprint now; ``None`` when it is gone, is no regular file, or lies outside the workspace."""
    path = _inside(workspace, relative)
    if path is None:
        return None
    try:
        stat = path.stat()
        if not path.is_file():
            return None
        digest = _sha256(path) if stat.st_size <= HASH_LIMIT_BYTES else None
    except OSError:
        return None
    return FileFingerprint(relative, stat.st_size, stat.st_mtime_ns, digest)


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            hasher.update(block)
    return hasher.hexdigest()


def changed_files(workspace: Path, files: Sequence[FileFingerprint]) -> list[str]:
    """The files whose content is no longer what the recipe saw (changed or gone), in the recipe's order.

    A file whose size and modification time are unchanged is taken as unchanged without
    reading it; otherwise its content decides (a touched file is not a changed one).
    """
    changed: list[str] = []
    for before in files:
        now = _quick(workspace, before)
        if now is None or now.size != before.size:
            changed.append(before.path)
        elif before.sha256 is None or now.sha256 is None:  # too large to hash: the modification time decides
            if now.mtime_ns != before.mtime_ns:
                changed.append(before.path)
        elif now.sha256 != before.sha256:
            changed.append(before.path)
    return changed


def _quick(workspace: Path, before: FileFingerprint) -> FileFingerprint | None:
    path = _inside(workspace, before.path)
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size == before.size and stat.st_mtime_ns == before.mtime_ns:
        return before
    return fingerprint(workspace, before.path)


# -- showing a recipe -----------------------------------------------------------------------------


def render_recipe(recipe: Recipe, changed: Sequence[str]) -> str:
    """A recipe as the turn's context shows it, with the files it relies on and the ones that changed."""
    lines = [f"TASK: {recipe.task}", "STEPS:"]
    lines += [f"{number}. {step}" for number, step in enumerate(recipe.steps, 1)]
    if recipe.avoid:
        lines.append("AVOID:")
        lines += [f"- {item}" for item in recipe.avoid]
    unchanged = [f.path for f in recipe.files if f.path not in changed]
    if unchanged:
        lines.append("Relies on (unchanged since): " + ", ".join(unchanged))
    if changed:
        lines.append("CHANGED since this recipe (read them again before following it): " + ", ".join(changed))
    return "\n".join(printable(line) for line in lines)


# -- corrections ----------------------------------------------------------------------------------

_CORRECTION = re.compile(
    r"""^\W*(?:
        (?:no|nope|nah)(?:\s*[,.!:;—–-]|\s*$|\s+(?:that|it|this|you|i\b|not|wrong|the)) |
        (?:that|this|it)(?:'?s|\s+is|\s+was)\s+(?:wrong|not\s+(?:right|it|correct|what)|incorrect|broken) |
        (?:that|this|it)\s+(?:did\s*n[o']?t|does\s*n[o']?t|does\s+not|did\s+not)\s+(?:work|help|fix) |
        (?:still|again)\s+(?:wrong|broken|failing|fails|not\s+working|the\s+same) |
        (?:wrong|incorrect)\b |
        not\s+(?:what\s+i\s+(?:asked|meant|wanted)|quite|right|correct|that) |
        you\s+(?:misunderstood|got\s+it\s+wrong|missed|forgot|broke|are\s+wrong|'re\s+wrong) |
        i\s+(?:said|meant|asked\s+for)\b |
        (?:try|do\s+it)\s+again |
        actually,?\s+(?:no|it|that|the) |
        (?:un|re)do\s+that
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_NOT_A_CORRECTION = re.compile(r"^\W*no\s*[,.!]?\s*(?:worries|problem|need|rush|thanks|thank)\b", re.IGNORECASE)


def is_correction(prompt: str) -> bool:
    """Whether ``prompt`` starts like a correction of the previous answer ("no, …", "that's wrong", …).

    The phrases are a short list grown from how people correct an assistant; "no worries" and
    "no need to …" are not corrections.
    """
    head = prompt.strip()[:120]
    return bool(_CORRECTION.match(head)) and not _NOT_A_CORRECTION.match(head)

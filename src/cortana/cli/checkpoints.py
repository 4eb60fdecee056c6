"""``/undo`` and ``/rewind`` in the interactive session, over the assistant's checkpoints.

``/undo`` puts back the files the last turn that wrote any changed (aider's ``/undo``, without git). ``/rewind``
lists the recent turns; ``/rewind N`` goes back to before turn N: its files and every later turn's (``code``),
the conversation (``chat``: a new thread holding the messages before that turn, the old one kept), or both (the
default), as Claude Code's ``/rewind`` does. A file someone else changed since the turn wrote it is not
overwritten without a yes. What ``run_command`` changed is not covered, and the session says so.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.text import Text

from cortana.assistant import Assistant
from cortana.display import printable
from cortana.memory.checkpoints import Checkpoint, Restored
from cortana.messages import ThreadRef

__all__ = ["NOT_COVERED", "CheckpointCommands"]

NOT_COVERED = "files changed by commands (run_command, ! lines) are not covered"
MODES = ("code", "chat", "both")


def _ago(started: float) -> str:
    minutes = max(0, int(time.time() - started) // 60)
    if minutes < 1:
        return "just now"
    return f"{minutes} min ago" if minutes < 120 else f"{minutes // 60} h ago"


class CheckpointCommands:
    """The session's ``/undo`` and ``/rewind``.

    Args:
        assistant: whose checkpoints and memory they use.
        out: where lists and results go; ``ask``: one answer from the user (a yes before overwriting).
        thread: the session's current thread; ``switch``: makes another one current (``/rewind`` of the chat).
    """

    def __init__(
        self,
        assistant: Assistant,
        out: Console,
        ask: Callable[[str], Awaitable[str]],
        thread: Callable[[], ThreadRef],
        switch: Callable[[ThreadRef], None],
    ) -> None:
        self.assistant = assistant
        self.out = out
        self.ask = ask
        self.thread = thread
        self.switch = switch
        self._listed: list[Checkpoint] = []

    def handlers(self) -> dict[str, Callable[[str], Awaitable[bool]]]:
        return {"/undo": self.undo, "/rewind": self.rewind}

    def _say(self, text: str, style: str = "") -> None:
        self.out.print(Text(printable(text), style=style), highlight=False, soft_wrap=True)

    async def undo(self, _: str) -> bool:
        """Put back the files the last turn that wrote any changed."""
        last = self.assistant.checkpoints.last_with_files()
        if last is None:
            self._say(f"Nothing to undo: no turn has written a file here yet ({NOT_COVERED}).")
            return True
        await self._restore(last, f"the turn {_ago(last.started_at)} ({last.prompt[:60]!r})")
        return True

    async def rewind(self, argument: str) -> bool:
        """``/rewind``: the recent turns; ``/rewind N [code|chat|both]``: back to before turn N."""
        words = argument.split()
        if not words:
            self._listed = self.assistant.checkpoints.recent(20)
            if not self._listed:
                self._say("No turns to rewind to yet.")
                return True
            for number, checkpoint in enumerate(self._listed, start=1):
                files = ", ".join(checkpoint.files[:4]) + (" …" if len(checkpoint.files) > 4 else "")
                changed = f" · {files}" if files else ""
                self._say(f"  {number:>2}. {_ago(checkpoint.started_at)} · {checkpoint.prompt[:60]!r}{changed}")
            self._say("/rewind N [code|chat|both] goes back to before turn N (both: files and conversation).", "dim")
            return True
        if not self._listed:
            self._listed = self.assistant.checkpoints.recent(20)
        mode = words[1] if len(words) > 1 else "both"
        if not words[0].isdigit() or not 1 <= int(words[0]) <= len(self._listed) or mode not in MODES:
            self._say("Usage: /rewind N [code|chat|both], with N from /rewind.")
            return True
        checkpoint = self._listed[int(words[0]) - 1]
        if mode in ("code", "both") and not await self._restore(checkpoint, f"before turn {words[0]}"):
            return True
        if mode in ("chat", "both"):
            await self._rewind_chat(checkpoint)
        self._listed = []
        return True

    async def _restore(self, checkpoint: Checkpoint, what: str) -> bool:
        """Restore the files from ``checkpoint`` on, asking before overwriting a file changed since; True when done."""
        checkpoints = self.assistant.checkpoints
        changed = checkpoints.changed_since(checkpoint.id)
        overwrite: list[str] = []
        if changed:
            self._say(f"Changed since the turn wrote them (by you or a command): {', '.join(changed)}", "yellow")
            answer = (await self.ask("Overwrite them too? [y/N] ")).strip().lower()
            if answer in ("y", "yes"):
                overwrite = changed
        result: Restored = checkpoints.restore(checkpoint.id, overwrite=overwrite)
        if result.restored:
            self._say(f"Restored {what}: {', '.join(result.restored)}.", "green")
        if result.changed_since:
            self._say(f"Left as they are: {', '.join(result.changed_since)}.", "yellow")
        if result.not_kept:
            self._say(f"Not kept (too large to keep), left as they are: {', '.join(result.not_kept)}.", "yellow")
        for path, why in result.refused.items():
            self._say(f"Refused to put back {path}: {why}.", "red")
        if not (result.restored or result.changed_since or result.not_kept or result.refused):
            self._say(f"No files to restore for {what}.")
        self._say(f"({NOT_COVERED}.)", "dim")
        return not result.changed_since and not result.not_kept and not result.refused

    async def _rewind_chat(self, checkpoint: Checkpoint) -> None:
        """A new thread with the conversation before ``checkpoint``'s turn; the old thread stays in memory."""
        memory = self.assistant.memory
        kept = await self.assistant.checkpoints.conversation_before(checkpoint, memory)
        thread = ThreadRef(resource_id=checkpoint.thread.resource_id, thread_id=uuid.uuid4().hex)
        if kept:
            await memory.append_messages(thread, kept)
        self.switch(thread)
        self._say(f"The conversation goes on from before that turn ({len(kept)} messages; /threads has the old one).")

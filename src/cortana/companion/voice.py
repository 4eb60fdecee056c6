"""Voice: replies spoken aloud through a local text-to-speech engine.

The engine is espeak-ng (Debian's and Homebrew's ``espeak-ng`` package; the
older ``espeak`` works too): it runs on the CPU, ships its voices in the
package and needs nothing downloaded at run time. Speaking runs in a child
process, so it never blocks the prompt; :meth:`Voice.speak` interrupts what is
being said, and :meth:`Voice.stop` silences it (a new turn does). Markdown is
read as prose: code blocks are announced, not spelled out, and links,
emphasis marks and table rules are left out (:func:`speakable_text`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shutil
from pathlib import Path

from cortana.errors import UserError

__all__ = ["INSTALL_HINT", "MAX_SPOKEN_CHARS", "Voice", "find_tts", "speakable_text"]

log = logging.getLogger("cortana.voice")

MAX_SPOKEN_CHARS = 2_000
"""The most of one reply that is read aloud; the rest is left to the screen."""
INSTALL_HINT = (
    "install espeak-ng: `sudo apt install espeak-ng` (Debian, Ubuntu), `brew install espeak-ng` (macOS), "
    "`sudo dnf install espeak-ng` (Fedora)"
)

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_OPEN_FENCE = re.compile(r"^(```|~~~).*\Z", re.S | re.M)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://[^\s)>\]]*[^\s.,;:!?)>\]]")
_INLINE_CODE = re.compile(r"`([^`\n]*)`")
_MARKS = re.compile(r"(\*\*|__|\*|~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*", re.M)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$", re.M)
_QUOTE = re.compile(r"^\s*>\s?", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def speakable_text(markdown: str, limit: int = MAX_SPOKEN_CHARS) -> str:
    """``markdown`` as text worth hearing: code blocks announced, links by their words, marks dropped."""
    text = _CONTROL.sub(" ", markdown)
    text = _FENCE.sub("(code block, shown on screen.)", text)
    text = _OPEN_FENCE.sub("(code block, shown on screen.)", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("(a link)", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _TABLE_RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _BULLET.sub("", text)
    text = _QUOTE.sub("", text)
    text = _MARKS.sub("", text)
    text = "\n".join(_table_row(line) for line in text.splitlines())
    lines = [" ".join(line.split()) for line in text.splitlines()]
    text = "\n".join(line for line in lines if line)
    if len(text) > limit:
        cut = text[:limit]
        end = max(cut.rfind(". "), cut.rfind("\n"))
        text = (cut[: end + 1] if end > limit // 2 else cut).rstrip() + " (The rest is on screen.)"
    return text


def _table_row(line: str) -> str:
    """A Markdown table row as its cells in a sentence (``| a | b |`` -> ``a, b``); other lines as they are."""
    if line.count("|") < 2:
        return line
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return ", ".join(cell for cell in cells if cell)


def find_tts() -> str | None:
    """The text-to-speech program on PATH: ``espeak-ng``, else ``espeak``; ``None`` when neither is installed."""
    return shutil.which("espeak-ng") or shutil.which("espeak")


class Voice:
    """Speaks text in the background through espeak-ng.

    Args:
        program: the TTS program (default: :func:`find_tts`).
        rate: words per minute.
        voice: an espeak-ng voice name (``en``, ``en-us``, ``de``...); ``None``: its default.
        enabled: whether :meth:`speak` speaks (``/voice on|off`` flips it).
    """

    def __init__(
        self, *, program: str | None = None, rate: int = 175, voice: str | None = None, enabled: bool = False
    ) -> None:
        if not 80 <= rate <= 450:
            raise UserError(f"the voice rate must be 80-450 words a minute, got {rate}.")
        self.program = program if program is not None else find_tts()
        self.rate = rate
        self.voice = voice
        self.enabled = enabled and self.program is not None
        self.last_error: str | None = None
        """Why the last speech failed (no audio device, a bad voice), for ``/voice``."""
        self._speaking: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None

    @property
    def available(self) -> bool:
        """Whether a TTS program was found."""
        return self.program is not None

    def describe(self) -> str:
        """One line for ``/voice`` and ``cortana doctor``."""
        if self.program is None:
            return f"unavailable: {INSTALL_HINT}"
        state = "on" if self.enabled else "off"
        failed = f" (last try failed: {self.last_error})" if self.last_error else ""
        return f"{state}; {Path(self.program).name} at {self.program}, {self.rate} words a minute{failed}"

    def _command(self, *extra: str) -> list[str]:
        if self.program is None:
            raise UserError(f"No text-to-speech program was found; {INSTALL_HINT}.")
        command = [self.program, "-s", str(self.rate)]
        if self.voice:
            command += ["-v", self.voice]
        return [*command, *extra]

    @property
    def speaking(self) -> bool:
        """Whether something is being said now."""
        return self._speaking is not None and self._speaking.returncode is None

    async def speak(self, markdown: str) -> None:
        """Say ``markdown`` (as :func:`speakable_text`) in the background, interrupting what is being said.

        Returns once speech has started; nothing happens while the voice is off.
        """
        if not self.enabled:
            return
        text = speakable_text(markdown)
        if not text:
            return
        await self.stop()
        process = await asyncio.create_subprocess_exec(
            *self._command("--stdin"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._speaking = process
        self._watch = asyncio.get_running_loop().create_task(self._finish(process, text), name="voice")

    async def _finish(self, process: asyncio.subprocess.Process, text: str) -> None:
        """Feed the text, wait for the end of speech, and keep what went wrong."""
        try:
            _, errors = await process.communicate(text.encode("utf-8"))
        except (BrokenPipeError, ConnectionResetError):
            return  # stopped while the text was being written
        lines = [line.strip() for line in errors.decode("utf-8", "replace").splitlines() if line.strip()]
        # espeak-ng exits 0 when it finds no audio device, and says so on stderr
        failed = [line for line in lines if line.lower().startswith("error")]
        if (process.returncode and process.returncode > 0) or failed:  # killed (negative) is a stop, not a failure
            no_device = any("alsa" in line.lower() or "pcm" in line.lower() for line in lines)
            reason = (failed or lines or [f"exit code {process.returncode}"])[-1]
            self.last_error = ("no audio output device was found" if no_device else reason)[:200]
            log.warning("speech failed: %s", self.last_error)
        elif process.returncode == 0:
            self.last_error = None

    async def wait(self, timeout: float | None = None) -> None:
        """Wait until what is being said has been said (at most ``timeout`` seconds, then stop)."""
        watch = self._watch
        if watch is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(watch), timeout)
        except TimeoutError:
            await self.stop()

    async def stop(self) -> None:
        """Stop speaking now (a new turn started)."""
        process, self._speaking = self._speaking, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await process.wait()
        watch, self._watch = self._watch, None
        if watch is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(watch, timeout=2)

    async def synthesize(self, markdown: str, path: Path) -> Path:
        """Write ``markdown``, as it would be spoken, to the WAV file ``path`` (and wait for it)."""
        text = speakable_text(markdown)
        process = await asyncio.create_subprocess_exec(
            *self._command("-w", str(path), "--stdin"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, errors = await process.communicate(text.encode("utf-8"))
        if process.returncode != 0:
            reason = errors.decode("utf-8", "replace").strip()[-300:] or f"exit code {process.returncode}"
            raise UserError(f"{self.program} could not write {path}: {reason}")
        return path

    async def aclose(self) -> None:
        """Stop speaking."""
        await self.stop()

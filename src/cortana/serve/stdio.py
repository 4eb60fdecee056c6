"""JSON-RPC messages, one a line, on this process's stdin and stdout, whatever they are: pipes, files, a terminal.

``cortana acp`` speaks through :class:`StdioTransport`, the ``agent-client-protocol`` package's message-level
transport. The package's own stdio streams are asyncio pipe transports, which refuse a regular file
(``cortana acp > out.jsonl`` stopped with "Pipe transport is only for pipes, sockets and character devices"), and
its reader logged a traceback for a line that is not JSON and let a line that is not an object (``[1, 2]``) end
the session. Here a thread of its own reads stdin and another writes stdout, so any kind of file does, and what
cannot be a message is answered as JSON-RPC says, with the session going on:

- a line that is not JSON: ``-32700`` (parse error), ``id`` null;
- JSON that is no message (not an object; an ``id`` that is no string or number; a ``method`` that is no
  string; neither a ``method`` nor an ``id``), or a line over :data:`MAX_LINE_BYTES`: ``-32600`` (invalid
  request), with the message's ``id`` where it has a usable one.

The end of stdin ends the session. On a pipe that means the editor left, and the turn in progress stops; a
regular file is a script (``cortana acp < requests.jsonl > answers.jsonl``), so the requests it held are
answered first, except those waiting on a question to the client, which nobody is left to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import select
import stat
import threading
from typing import Any

from acp import RequestError

__all__ = ["MAX_LINE_BYTES", "StdioTransport"]

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 * 1024 * 1024
"""The longest line read as a message. A prompt with files attached (200,000 characters each at most) is a few MB;
a line past this bound is answered as an invalid request and skipped, held in memory no further than the bound."""
_READ_CHUNK = 1 << 16
_WAITING_LINES = 64
"""Lines read ahead of the session: past them the reading thread waits, and so does whoever writes to stdin."""


class _TooLong:
    """A line over :data:`MAX_LINE_BYTES`, in place of its bytes."""


_EOF = None


class StdioTransport:
    """The ``acp`` package's ``Transport`` over two file descriptors (default: stdin and stdout).

    Args:
        reading: the descriptor messages come in on.
        writing: the descriptor messages go out on.
        max_line: the longest line read as a message, in bytes.
    """

    def __init__(self, reading: int = 0, writing: int = 1, *, max_line: int = MAX_LINE_BYTES) -> None:
        self._reading = reading
        self._writing = writing
        self._max_line = max_line
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[bytes | _TooLong | None] = asyncio.Queue(maxsize=_WAITING_LINES)
        self._outbox: queue.SimpleQueue[tuple[bytes, asyncio.Future[None]] | None] = queue.SimpleQueue()
        self._closed = False
        self._broken = False  # stdout refused a write: the client is gone
        self._unanswered: set[Any] = set()  # ids of the client's requests not yet answered
        self._asked: set[Any] = set()  # ids of our requests the client has not answered
        self._answered = asyncio.Event()
        self._script = _is_regular_file(reading)
        threading.Thread(target=self._read_lines, name="acp-stdin", daemon=True).start()
        threading.Thread(target=self._write_lines, name="acp-stdout", daemon=True).start()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; ``None`` at the end of stdin (after a script's requests are answered)."""
        while True:
            line = await self._lines.get()
            if line is _EOF or self._broken:
                await self._answered_all()
                return None
            if isinstance(line, _TooLong):
                details = f"a line over {self._max_line:,} bytes was skipped unread: send smaller messages"
                await self._refuse(RequestError.invalid_request({"details": details}), None)
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
                details = f"the line is not JSON: {error}" if isinstance(error, ValueError) else "nested too deeply"
                await self._refuse(RequestError.parse_error({"details": details}), None)
                continue
            problem = _problem(message)
            if problem is not None:
                message_id = message.get("id") if isinstance(message, dict) and _is_id(message.get("id")) else None
                await self._refuse(RequestError.invalid_request({"details": problem}), message_id)
                continue
            if "method" in message and "id" in message:
                self._unanswered.add(message["id"])
            elif "method" not in message:
                self._asked.discard(message["id"])
            return message  # type: ignore[no-any-return]

    async def send(self, message: dict[str, Any]) -> None:
        """Write ``message`` as one line; once stdout is closed or refused, messages are dropped."""
        if "method" in message and "id" in message:
            self._asked.add(message["id"])
        elif "method" not in message and "id" in message:
            self._unanswered.discard(message["id"])
        self._answered.set()
        if self._closed or self._broken:
            return
        written: asyncio.Future[None] = self._loop.create_future()
        self._outbox.put(((json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8"), written))
        await written

    async def close(self) -> None:
        """Stop writing, once what was sent is written (the reading thread ends at the end of stdin)."""
        if not self._closed:
            self._closed = True
            self._outbox.put(None)

    async def _refuse(self, error: RequestError, message_id: Any) -> None:
        log.debug("answered a line on stdin with %s: %s", error.code, error.data)
        await self.send({"jsonrpc": "2.0", "id": message_id, "error": error.to_error_obj()})

    async def _answered_all(self) -> None:
        """For a script on stdin: wait until its requests are answered, or one waits on the client."""
        while self._script and not self._broken and self._unanswered and not self._asked:
            self._answered.clear()
            await self._answered.wait()

    def _read_lines(self) -> None:
        """The reading thread: stdin's lines into the queue, each bounded, then the end."""
        line = bytearray()
        skipping = False
        while True:
            chunk = _read(self._reading)
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                whole = not skipping and len(line) + end - start <= self._max_line
                if not self._put(bytes(line + chunk[start:end]) if whole else _TooLong()):
                    return
                line.clear()
                skipping = False
                start = end + 1
            if not skipping:
                line += chunk[start:]
                if len(line) > self._max_line:
                    line.clear()
                    skipping = True
        if skipping:
            self._put(_TooLong())
        elif line:
            self._put(bytes(line))
        self._put(_EOF)

    def _put(self, item: bytes | _TooLong | None) -> bool:
        """Hand ``item`` to the session, waiting while it has lines enough in hand (stdin is read no faster than
        the session takes them); False once the loop is closed and nobody reads on."""
        try:
            asyncio.run_coroutine_threadsafe(self._lines.put(item), self._loop).result()
        except RuntimeError:
            return False
        return True

    def _write_lines(self) -> None:
        """The writing thread: each message's bytes to stdout whole, in the order sent."""
        while (item := self._outbox.get()) is not None:
            data, written = item
            error: OSError | None = None
            if not self._broken:
                try:
                    _write_all(self._writing, data)
                except OSError as failed:
                    error = failed
            self._loop.call_soon_threadsafe(self._written, written, error)

    def _written(self, written: asyncio.Future[None], error: OSError | None) -> None:
        if error is not None and not self._broken:
            self._broken = True  # the client closed its end: the session ends as at the end of stdin
            log.warning("stdout refused a message (%s): the client is gone", error)
            self._answered.set()
            with contextlib.suppress(asyncio.QueueFull):
                self._lines.put_nowait(_EOF)
        if not written.done():
            written.set_result(None)


def _problem(message: Any) -> str | None:
    """Why ``message`` is no JSON-RPC message; None when it is one."""
    if not isinstance(message, dict):
        return f"a message is a JSON object, not {type(message).__name__}"
    if "id" in message and not _is_id(message["id"]):
        return "id must be a string, a number or null"
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "method" not in message and "id" not in message:
        return "a message has a method (a request or notification) or an id (a response)"
    return None


def _is_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool))


def _is_regular_file(descriptor: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(descriptor).st_mode)
    except OSError:
        return False


def _read(descriptor: int) -> bytes:
    """Up to a chunk from ``descriptor``, waiting for it; empty at its end (or when it cannot be read)."""
    while True:
        try:
            return os.read(descriptor, _READ_CHUNK)
        except BlockingIOError:  # a descriptor left non-blocking by whoever shares it
            select.select([descriptor], [], [])
        except OSError as error:
            log.warning("stdin could not be read (%s): taken as its end", error)
            return b""


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(descriptor, view) :]
        except BlockingIOError:
            select.select([], [descriptor], [])

"""The assistant behind ``cortana serve``: chat histories onto threads, turns through the queue, check-ins out.

Nothing here knows a protocol: :class:`ChatService` takes a client's messages
(:class:`ChatInput`) and yields the turn as pieces (text, tool activity, the
end); ``cortana.serve.openai_chat`` reads OpenAI's messages into it and writes
the pieces as OpenAI's responses (``cortana.serve.http`` serves them), and the
MCP server (``cortana.serve.mcp_server``) has its own tools. One :class:`~cortana.Assistant` serves
every client: its memory, recall, code graph, tools and learning.

Tools run on the server, inside the assistant's permission gate. Nobody can
answer an approval over an API, so what the gate would ask is refused
(:func:`refuse_over_api`), the model is told why, and the answer ends with a
note of what was not done; cortana.yml's ``permissions.allow`` (the user's
own, or a trusted folder's) is how to let a tool run. For the same reason a
command the model starts in the background (``run_command(background=true)``)
ends with the served turn that started it (``keep_background=False``).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cortana.assistant import RESOURCE_ID, Assistant
from cortana.errors import UserError
from cortana.messages import Message, RunMetrics, RunResult, ThreadRef
from cortana.serve.conversations import ConversationMap, Turn, conversation_key
from cortana.serve.queue import Busy, RunQueue
from cortana.streams import closing
from cortana.tools.permissions import PermissionDecision

if TYPE_CHECKING:
    from cortana.models.base import ModelSettings
    from cortana.tools import Tool

__all__ = [
    "REFUSED_OVER_API",
    "BadRequest",
    "Busy",
    "ChatInput",
    "ChatService",
    "CheckIn",
    "ToolActivity",
    "TurnEnd",
    "TurnStream",
    "refuse_over_api",
]

log = logging.getLogger(__name__)

REFUSED_OVER_API = "it needs the user's approval, and nobody can give approval over the API"
"""The reason the model reads for a call the gate would have asked about. The server knows such a call by its
result's ``refusal`` (``approval``), not by these words."""

THREAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
"""What a client may name a thread: letters, digits and ``._:-``, up to 128 characters."""

SUMMARY_CHARS = 400
"""How much of a tool's result a client is shown (the model reads all of it)."""
FIX_TOOL = "fix"
"""How the fix workflow shows in a served answer's tool activity (a change request in a project with tests)."""


def refuse_over_api(call: object, tool: Tool, reason: str | None = None, scope: object = None) -> PermissionDecision:
    """The approver of a served assistant: whatever the gate would ask is refused, and the model told why."""
    return PermissionDecision.deny(
        f"{REFUSED_OVER_API}. Do not retry it; tell the user what you would have done, so they can do it or allow it"
    )


class BadRequest(UserError):
    """A request the server cannot take; ``param`` names the part at fault (OpenAI's error field)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ChatInput:
    """A client's messages, as the assistant takes them.

    Attributes:
        prompt: the new user message (the last message).
        dialogue: the user and assistant messages before it, in order.
        instructions: the client's system (or developer) messages, joined; given to the turn as context.
    """

    prompt: str
    dialogue: tuple[Turn, ...] = ()
    instructions: str = ""


@dataclass(frozen=True)
class ToolActivity:
    """A tool call the assistant made while answering, as a client is shown it.

    Attributes:
        kind: ``tool_call`` when it starts, ``tool_result`` when it ends.
        id: the call's id (a result has its call's).
        name: the tool.
        arguments: what the model passed (``tool_call`` only).
        ok: whether it succeeded (``tool_result`` only).
        refused: it needed an approval nobody could give over the API (``tool_result`` only).
        summary: the start of its result (``tool_result`` only).
    """

    kind: Literal["tool_call", "tool_result"]
    id: str
    name: str
    arguments: dict[str, Any] | None = None
    ok: bool | None = None
    refused: bool = False
    summary: str = ""

    def as_json(self) -> dict[str, Any]:
        """The documented extension object (docs/serve.md), without the fields that do not apply."""
        data: dict[str, Any] = {"type": self.kind, "id": self.id, "name": self.name}
        if self.kind == "tool_call":
            data["arguments"] = self.arguments or {}
        else:
            data.update(ok=self.ok, refused=self.refused, summary=self.summary)
        return data


@dataclass(frozen=True)
class TurnEnd:
    """The turn is over: its result, the thread it continued, and the text the client was shown."""

    result: RunResult
    thread: ThreadRef
    shown: str
    refused: tuple[str, ...] = ()


Piece = str | ToolActivity | TurnEnd
"""What a turn yields: answer text as it comes, tool activity, and last its end."""


class TurnStream:
    """A turn's pieces (see :meth:`ChatService.begin`); ``aclose`` stops the run, or gives up its unused place."""

    def __init__(self, thread: ThreadRef, pieces: AsyncGenerator[Piece, None], unused: Callable[[], None]) -> None:
        self.thread = thread
        """The thread the turn continues (known before it runs)."""
        self._pieces = pieces
        self._unused = unused

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> Piece:
        return await anext(self._pieces)

    async def aclose(self) -> None:
        """Stop: the run is cancelled where it is (the user's message stays saved)."""
        try:
            await self._pieces.aclose()
        finally:
            self._unused()


@dataclass(frozen=True)
class CheckIn:
    """A message the assistant sent on its own (the heartbeat), numbered for ``Last-Event-ID``."""

    id: int
    text: str
    thread: str
    created: float


def refusal_note(refused: Sequence[str]) -> str:
    """The line an answer ends with when tools were refused; empty when none were."""
    if not refused:
        return ""
    names = ", ".join(dict.fromkeys(refused))
    return (
        f"\n\n(Not done: {names} needed an approval, which cannot be given over the API. To let the assistant do "
        "this when served, allow the tool in your cortana.yml: `permissions: {allow: [" + refused[0] + "]}`.)"
    )


@dataclass
class _Subscribers:
    """Queues of the clients listening for check-ins, and the newest check-ins for one that reconnects."""

    queues: set[asyncio.Queue[CheckIn]] = field(default_factory=set)
    recent: collections.deque[CheckIn] = field(default_factory=lambda: collections.deque(maxlen=50))


class ChatService:
    """One assistant serving many clients.

    Args:
        assistant: the assistant (built with ``approve=refuse_over_api``, so no call waits for an approval,
            ``keep_background=False``, so nothing a turn starts in the background runs on where nobody could stop
            it, and ``client_label``: ``serve`` over HTTP, ``mcp`` for ``cortana mcp-serve``).
        conversations: where histories map onto threads (default: the workspace's ``.cortana/serve.db``).
        queue: the turns waiting for the engine (default: the engine's parallel slots, cortana.yml's bound).
    """

    def __init__(
        self,
        assistant: Assistant,
        *,
        conversations: ConversationMap | None = None,
        queue: RunQueue | None = None,
    ) -> None:
        settings = assistant.settings
        self.assistant = assistant
        self.conversations = conversations or ConversationMap(assistant.workspace / ".cortana" / "serve.db")
        self.queue = queue or RunQueue(settings.parallel, settings.serve.max_waiting)
        self.max_messages = settings.serve.max_messages
        self.last_thread: ThreadRef = assistant.thread
        self._beat_thread: ThreadRef | None = None
        self._claimed: set[str] = set()
        self._subscribers = _Subscribers()
        self._ids = itertools.count(1)

    # -- conversations -----------------------------------------------------------------------------------------

    def _route(self, chat: ChatInput, name: str | None) -> tuple[ThreadRef, list[Turn] | None]:
        """The thread this request continues, and the history to seed it with (None: seed only if it is empty)."""
        if name is not None:
            if not THREAD_NAME.fullmatch(name):
                raise BadRequest(
                    "a thread name is 1-128 letters, digits and ._:- (starting with a letter or digit)", "user"
                )
            return ThreadRef(resource_id=RESOURCE_ID, thread_id=name), None
        if chat.dialogue:
            found = self.conversations.find(conversation_key(chat.dialogue))
            if found is not None and found[1] and found[0] not in self._claimed:
                return ThreadRef(resource_id=RESOURCE_ID, thread_id=found[0]), []
        return ThreadRef(resource_id=RESOURCE_ID, thread_id=uuid.uuid4().hex), list(chat.dialogue)

    async def _seed(self, thread: ThreadRef, seed: list[Turn] | None, dialogue: Sequence[Turn]) -> None:
        if seed is None:  # a named thread: the client's history only if the server has none of its own
            memory = self.assistant.memory
            seed = [] if await memory.messages(thread) else list(dialogue)
        if seed:
            await self.assistant.memory.append_messages(
                thread, [Message.user(text) if role == "user" else Message.assistant(text) for role, text in seed]
            )

    # -- turns -------------------------------------------------------------------------------------------------

    def begin(
        self, chat: ChatInput, *, thread_name: str | None = None, settings: ModelSettings | None = None
    ) -> TurnStream:
        """Take ``chat``'s place in the queue, at once: :class:`BadRequest` for a bad thread name, ``Busy`` when too
        many wait. Iterating the stream waits for the turn, then yields text and tool activity as they come, and
        last a :class:`TurnEnd`; closing it stops the run (or gives up the place)."""
        thread, seed = self._route(chat, thread_name)
        place = self.queue.reserve()
        self._claimed.add(thread.thread_id)

        async def pieces() -> AsyncGenerator[Piece, None]:
            try:
                async with self.queue.turn(thread.thread_id, place):
                    async for piece in self._answer(chat, thread, seed, settings):
                        yield piece
            finally:
                self._claimed.discard(thread.thread_id)

        def unused() -> None:
            place.give_up()
            self._claimed.discard(thread.thread_id)

        return TurnStream(thread, pieces(), unused)

    async def _answer(
        self, chat: ChatInput, thread: ThreadRef, seed: list[Turn] | None, settings: ModelSettings | None
    ) -> AsyncIterator[Piece]:
        """The client's turn through the assistant's one door (``Assistant.turn``: hooks, routing, fitting, the
        turn's own checkpoint), its events as the pieces a response streams."""
        from cortana.agent.events import TextDelta, ToolCallFinished, ToolCallStarted
        from cortana.turn.events import FixFinished, FixStarted, TurnFinished, TurnHeld

        await self.assistant.agent()
        await self._seed(thread, seed, chat.dialogue)
        self.last_thread = thread
        context = (
            f"The client's instructions for this conversation:\n{chat.instructions}" if chat.instructions else None
        )
        shown: list[str] = []
        refused: list[str] = []
        end: TurnFinished | None = None
        fix_call = f"fix-{uuid.uuid4().hex[:12]}"
        turn = self.assistant.turn(chat.prompt, thread=thread, context=context, settings=settings)
        async with closing(turn) as events:
            async for event in events:
                if isinstance(event, TextDelta) and event.text:
                    shown.append(event.text)
                    yield event.text
                elif isinstance(event, ToolCallStarted):
                    call = event.call
                    yield ToolActivity("tool_call", call.id, call.name, arguments=dict(call.arguments))
                elif isinstance(event, ToolCallFinished):
                    was_refused = event.result.refusal == "approval"  # an approval nobody can give over the API
                    if was_refused:
                        refused.append(event.call.name)
                    content = event.result.content
                    summary = content if len(content) <= SUMMARY_CHARS else content[:SUMMARY_CHARS] + "…"
                    yield ToolActivity(
                        "tool_result",
                        event.call.id,
                        event.call.name,
                        ok=not event.is_error,
                        refused=was_refused,
                        summary=summary,
                    )
                elif isinstance(event, FixStarted):
                    yield ToolActivity("tool_call", fix_call, FIX_TOOL, arguments={"request": event.request})
                elif isinstance(event, FixFinished):
                    outcome = event.outcome
                    result = outcome.result
                    written_all = result.patch is None or len(outcome.written) == len(result.patch.files)
                    if not written_all:
                        refused.append("edit_file")
                    yield ToolActivity(
                        "tool_result", fix_call, FIX_TOOL, ok=outcome.complete, refused=not written_all,
                        summary=result.summary(),
                    )  # fmt: skip
                    shown.append(outcome.answer)
                    yield outcome.answer
                elif isinstance(event, TurnHeld):
                    note = event.message
                    shown.append(note)
                    yield note
                elif isinstance(event, TurnFinished):
                    end = event
        assert end is not None, "a turn that ends without an error ends with TurnFinished"
        note = refusal_note(refused)
        if note:
            shown.append(note)
            yield note
        text = "".join(shown)
        answered = (*chat.dialogue, ("user", chat.prompt), ("assistant", text))
        self.conversations.advance(thread.thread_id, conversation_key(answered))
        self._claimed.discard(thread.thread_id)  # before the client hears the end: its next request continues here
        run = end.result.run or RunResult(output=text, new_messages=[], metrics=RunMetrics(), thread=thread)
        yield TurnEnd(run, thread, text, tuple(refused))

    async def ask(
        self, prompt: str, *, thread_name: str | None = None, settings: ModelSettings | None = None
    ) -> TurnEnd:
        """One turn to its end (the MCP server's ``ask``): ``prompt`` on the named thread, or a new one."""
        end: TurnEnd | None = None
        stream = self.begin(ChatInput(prompt), thread_name=thread_name, settings=settings)
        try:
            async for piece in stream:
                if isinstance(piece, TurnEnd):
                    end = piece
        finally:
            await stream.aclose()
        assert end is not None
        return end

    # -- check-ins ---------------------------------------------------------------------------------------------

    async def start_heartbeat(self) -> bool:
        """Let the assistant check in, as cortana.yml's ``heartbeat:`` says: each check-in is written on the most
        recently used thread, joins that thread's memory, and goes to :meth:`check_ins` listeners marked with that
        thread (a request on another thread meanwhile does not move it). False when the heartbeat is off."""

        def beat_thread() -> ThreadRef:
            self._beat_thread = self.last_thread  # the thread this beat runs on, and so the one it belongs to
            return self._beat_thread

        heartbeat = await self.assistant.start_heartbeat(
            on_message=self.publish, is_busy=lambda: self.queue.running > 0, thread=beat_thread
        )
        return heartbeat is not None

    def publish(self, text: str, thread: ThreadRef | None = None) -> CheckIn:
        """Send a check-in to every listener (a slow listener's oldest unread ones are dropped), marked with
        ``thread`` (default: the thread the last beat ran on)."""
        thread = thread or self._beat_thread or self.last_thread
        check_in = CheckIn(next(self._ids), text, thread.thread_id, time.time())
        self._subscribers.recent.append(check_in)
        for queue in self._subscribers.queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(check_in)
        return check_in

    async def check_ins(self, after: int = 0, *, thread: str | None = None) -> AsyncGenerator[CheckIn, None]:
        """Check-ins as they come, after those newer than ``after`` (a reconnecting client's ``Last-Event-ID``);
        with ``thread``, only those that belong to that thread."""
        queue: asyncio.Queue[CheckIn] = asyncio.Queue(maxsize=100)
        self._subscribers.queues.add(queue)
        last = after
        try:
            for check_in in list(self._subscribers.recent):
                if check_in.id > last and thread in (None, check_in.thread):
                    last = check_in.id
                    yield check_in
            while True:
                check_in = await queue.get()
                if check_in.id > last and thread in (None, check_in.thread):
                    last = check_in.id
                    yield check_in
        finally:
            self._subscribers.queues.discard(queue)

    def close(self) -> None:
        """Close the conversation map (the assistant is the caller's)."""
        self.conversations.close()

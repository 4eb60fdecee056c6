"""``cortana acp``: the assistant as an editor's agent over the Agent Client Protocol (JSON-RPC on stdio).

Zed, JetBrains IDEs and Neovim (CodeCompanion, avante.nvim) start ``cortana acp`` and talk to it on its stdin and
stdout, through the ``agent-client-protocol`` package. What the editor sees:

- a **session** per conversation: ``session/new`` starts a Cortana thread (labelled ``acp``; memory and recall
  are the terminal's), ``session/load`` continues a stored one (the terminal's too) and shows it again,
  ``session/list`` lists them;
- a **prompt turn** streamed as session updates: the answer's text as it comes, each tool call with its kind,
  status and result, a diff for every file a turn wrote, and the fix workflow (a change asked for in a project
  with tests) as a plan of its steps and one tool call that shows its progress and its diff;
- the gate's questions as the editor's **permission requests**: allow once, always (for the scope Cortana would
  remember, named in the option), reject, reject always;
- **cancel** stops the turn; files the turn wrote are put back as they were (the fix workflow writes only at its
  end, from a scratch copy); closing a session ends the commands it started in the background;
- **files through the editor** when it offers that (``fs.readTextFile``/``writeTextFile``): the file tools read
  the editor's buffers, saved or not, and write through it, after the workspace's own checks of the path.

Each session's folder (its ``cwd``) is a workspace with its own assistant (settings, memory, gate); they share the
engine started at launch. A folder's cortana.yml counts only as far as the user trusted it (``cortana trust``):
nobody is on a terminal to ask. docs/editors.md has Zed's and CodeCompanion's settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import re
import stat
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import acp
from acp import schema

from cortana import __version__
from cortana.assistant import RESOURCE_ID, Assistant
from cortana.display import valid_text
from cortana.errors import CortanaError, ToolError
from cortana.messages import Message, ThreadRef, ToolCall, is_users_own
from cortana.prompts import strip_turn_context
from cortana.safefs import PathRefused, SafeTree
from cortana.sandbox.policy import too_wide
from cortana.serve.stdio import StdioTransport
from cortana.streams import closing
from cortana.tools.permissions import PermissionDecision
from cortana.turnstate import TurnState, turn_state

if TYPE_CHECKING:
    from cortana.agent.events import RunEvent
    from cortana.config import Settings
    from cortana.models.base import ModelClient
    from cortana.repair.run import FixOutcome, Progress
    from cortana.tools import Tool
    from cortana.tools.permissions import Scope

__all__ = ["CortanaAgent", "serve_acp"]

log = logging.getLogger(__name__)

TITLE_CHARS = 120
"""The most characters of a tool call's title (its name and main argument)."""
EMBEDDED_CHARS = 200_000
"""The most characters of one file the editor attaches to a prompt (the turn's window is fitted after)."""
CLIENT_TIMEOUT = 60.0
"""How long a file tool waits for the editor to read or write a buffer."""
McpServer = schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio
"""An MCP server the editor offers a session (Cortana uses the servers its cortana.yml names, not these)."""
ContentBlock = (
    schema.TextContentBlock
    | schema.ImageContentBlock
    | schema.AudioContentBlock
    | schema.ResourceContentBlock
    | schema.EmbeddedResourceContentBlock
)

INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR, NOT_FOUND = -32600, -32602, -32603, -32002
"""JSON-RPC's error codes (and ACP's for a resource not found): each error carries Cortana's own message."""

_SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("cortana_acp_session")
"""The session whose turn runs in this context (the file tools' threads and the gate's questions read it)."""


@dataclass
class Session:
    """One editor conversation: its thread, its folder's assistant, the running turn, and what the turn wrote."""

    id: str
    thread: ThreadRef
    assistant: Assistant
    turn: asyncio.Task[schema.StopReason] | None = None
    state: TurnState | None = None
    """The running turn's own state (its checkpoint holds what each file it wrote held before)."""


class EditorFiles:
    """The file tools' :class:`~cortana.tools.builtin.EditorBuffers` over ACP: the editor's buffers when it offers
    them (called from a tool's thread; the request goes through the event loop). What each file held before a turn
    wrote it is the turn's checkpoint's, as in the terminal."""

    def __init__(self, agent: CortanaAgent, loop: asyncio.AbstractEventLoop) -> None:
        self.agent = agent
        self.loop = loop

    def _ask(self, request: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(request, self.loop).result(timeout=CLIENT_TIMEOUT)

    def read_text(self, path: Path) -> str | None:
        session, conn = _SESSION.get(None), self.agent.conn
        if session is None or conn is None or not self.agent.can_read:
            return None
        try:
            response = self._ask(conn.read_text_file(session_id=session.id, path=str(path)))
        except Exception as error:  # an editor that cannot read it (a file it does not hold): the disk's text
            log.info("the editor did not read %s (%s); reading the disk", path, error)
            return None
        return valid_text(response.content)

    def write_text(self, path: Path, text: str) -> bool:
        session, conn = _SESSION.get(None), self.agent.conn
        if session is None or conn is None or not self.agent.can_write:
            return False
        try:
            self._ask(conn.write_text_file(session_id=session.id, path=str(path), content=text))
        except Exception as error:  # said to the model as the tool's error: nothing was written
            raise ToolError(f"The editor did not write '{path.name}': {error or type(error).__name__}.") from None
        return True


class _FixView:
    """A fix in the editor: a plan of its four steps, and one tool call with its progress, its diff and its answer."""

    STEPS = ("Run the tests", "Find where the failure comes from", "Try patches in a scratch copy", "Write the fix")
    STAGES: ClassVar[dict[str, int]] = {
        "tests": 0,
        "localize": 1,
        "sample": 2,
        "validate": 2,
        "climb": 2,
        "escalate": 2,
        "rename": 2,
        "trim": 2,
    }

    def __init__(self, send: Callable[[Any], Coroutine[Any, Any, None]], session: Session) -> None:
        self.send = send
        self.session = session
        self.call_id = f"fix-{uuid.uuid4().hex[:8]}"
        self.reached = 0
        self.lines: list[str] = []
        self.pending: set[asyncio.Task[None]] = set()

    def _plan(self, done: int, finished: bool = False) -> Any:
        return acp.update_plan(
            acp.plan_entry(
                step, status="completed" if i < done or finished else "in_progress" if i == done else "pending"
            )
            for i, step in enumerate(self.STEPS)
        )

    async def started(self, request: str) -> None:
        await self.send(self._plan(0))
        started = acp.start_tool_call(
            self.call_id, f"fix: {request[:100]}", kind="edit", status="in_progress", raw_input={"request": request}
        )
        await self.send(started)

    def progress(self, step: Progress) -> None:
        """One step: the plan moves on, the call's progress grows (sent in order, without holding the fix up)."""
        self.lines.append(f"{step.seconds:.0f}s: {step.message}")
        self.reached = max(self.reached, self.STAGES.get(str(step.stage), self.reached))
        content = [acp.tool_content(acp.text_block("\n".join(self.lines[-20:])))]
        for update in (self._plan(self.reached), acp.update_tool_call(self.call_id, content=content)):
            task = asyncio.get_running_loop().create_task(self.send(update))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def finished(self, outcome: FixOutcome) -> None:
        await asyncio.gather(*self.pending)
        result, workspace = outcome.result, self.session.assistant.workspace
        content: list[Any] = []
        if result.patch is not None:
            for path, text in result.patch.files.items():
                content.append(acp.tool_diff_content(str(workspace / path), text, result.originals.get(path)))
        content.append(acp.tool_content(acp.text_block(result.summary())))
        ended = acp.update_tool_call(
            self.call_id,
            status="completed" if outcome.complete else "failed",
            content=content,
            raw_output={"status": str(result.status), "written": outcome.written},
        )
        await self.send(ended)
        await self.send(self._plan(3, finished=outcome.complete))
        await self.send(acp.update_agent_message_text(outcome.answer))


def _tool_named(session: Session, name: str) -> Tool | None:
    """The session's agent's tool called ``name`` (a stored call replayed), or None."""
    agent = session.assistant.ready_agent
    return next((tool for tool in agent.tools if tool.name == name), None) if agent is not None else None


def prompt_text(blocks: list[Any]) -> str:
    """The user's message from a prompt's content blocks: text as it is, a file the editor attached as a fenced
    block under its path (bounded), a link to one as its path; images and audio are named and left out."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, schema.TextResourceContents):
                text = resource.text
                if len(text) > EMBEDDED_CHARS:
                    text = text[:EMBEDDED_CHARS] + f"\n[... {len(resource.text) - EMBEDDED_CHARS:,} characters cut]"
                fence = "`" * max(3, _longest_run(text, "`") + 1)  # a fence the file's own backticks cannot close
                parts.append(f"{_path_of(resource.uri)}:\n{fence}\n{text}\n{fence}")
            else:
                parts.append(f"[attached: {_path_of(resource.uri)} (binary, not shown)]")
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(f"[file: {_path_of(block.uri)}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} attached: Cortana reads text only]")
    return valid_text("\n\n".join(part for part in parts if part))


def _path_of(uri: str) -> str:
    return uri.removeprefix("file://")


def _longest_run(text: str, char: str) -> int:
    """The longest run of ``char`` in ``text``."""
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)


def call_title(call: ToolCall) -> str:
    """A tool call as the editor's list shows it: the tool and its main argument (a path, a command, a pattern)."""
    arguments = call.arguments
    main = next((arguments[key] for key in ("path", "command", "pattern", "request", "query") if key in arguments), "")
    title = f"{call.name} {main}".strip() if isinstance(main, str) else call.name
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def _locations(call: ToolCall, root: Path) -> list[schema.ToolCallLocation] | None:
    path = call.arguments.get("path")
    if not isinstance(path, str) or not path:
        return None
    line = call.arguments.get("start_line")
    return [schema.ToolCallLocation(path=str(root / path), line=line if isinstance(line, int) else None)]


class CortanaAgent:
    """The ACP agent (the package's ``acp.Agent`` protocol): sessions onto Cortana's threads, one assistant per
    folder, all on one engine. See the module docstring.

    Args:
        client: the engine, started or starting (the editor gets its answers to ``initialize`` at once, while the
            engine loads), shared by every folder's assistant; closed by :meth:`aclose`.
        settings_for: a folder's settings (cortana.yml as far as it is trusted, and the environment).
        allow_all: allow every tool call without asking (``--yes``), protected paths aside.
        context_window: the window the loop assumes (``--context-window``).
    """

    def __init__(
        self,
        client: ModelClient | Awaitable[ModelClient],
        settings_for: Callable[[Path], Settings],
        *,
        allow_all: bool = False,
        context_window: int | None = None,
    ) -> None:
        self.client: asyncio.Future[ModelClient] = _future(client)
        self.settings_for = settings_for
        self.allow_all = allow_all
        self.context_window = context_window
        self.conn: acp.Client | None = None
        self.can_read = False
        self.can_write = False
        self._assistants: dict[Path, Assistant] = {}
        self._sessions: dict[str, Session] = {}

    # -- the connection -----------------------------------------------------------------------------------------

    def on_connect(self, conn: acp.Client) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: schema.ClientCapabilities | None = None,
        client_info: schema.Implementation | None = None,
        **kwargs: Any,
    ) -> schema.InitializeResponse:
        fs = client_capabilities.fs if client_capabilities is not None else None
        self.can_read = bool(fs and fs.read_text_file)
        self.can_write = bool(fs and fs.write_text_file)
        return schema.InitializeResponse(
            protocol_version=min(protocol_version, acp.PROTOCOL_VERSION),
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(image=False, audio=False, embedded_context=True),
                session_capabilities=schema.SessionCapabilities(
                    list=schema.SessionListCapabilities(), close=schema.SessionCloseCapabilities()
                ),  # an editor that closes a session ends what it started in the background
            ),
            agent_info=schema.Implementation(name="cortana", title="Cortana", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> schema.AuthenticateResponse | None:
        return schema.AuthenticateResponse()  # a local engine: nothing to sign in to

    # -- sessions -------------------------------------------------------------------------------------------------

    def _assistant(self, cwd: str) -> Assistant:
        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise acp.RequestError(INVALID_PARAMS, f"cwd {cwd!r} is not an absolute path to a folder")
        folder = folder.resolve()
        wide = too_wide(folder)
        if wide is not None:  # nobody could be asked there as the terminal asks: refused with the reason
            raise acp.RequestError(
                INVALID_PARAMS,
                f"cwd {cwd!r}: {wide}; Cortana works in a project folder, where the commands it runs may write only "
                "that folder: open a project, or start a session in one",
            )
        assistant = self._assistants.get(folder)
        if assistant is None:
            assistant = Assistant(
                folder,
                self.settings_for(folder),
                client=self.client,
                keep_client=True,
                approve=self._approve,
                allow_all=self.allow_all,
                context_window=self.context_window,
                voice=False,
                heartbeat=False,
                buffers=EditorFiles(self, asyncio.get_running_loop()),
                client_label="acp",
            )
            self._assistants[folder] = assistant
        return assistant

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise acp.RequestError(INVALID_PARAMS, f"no session {session_id!r}: start one (session/new) or load it")
        return session

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> schema.NewSessionResponse:
        assistant = self._assistant(cwd)
        thread = ThreadRef(resource_id=RESOURCE_ID, thread_id=uuid.uuid4().hex)
        self._sessions[thread.thread_id] = Session(thread.thread_id, thread, assistant)
        return schema.NewSessionResponse(session_id=thread.thread_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> schema.LoadSessionResponse | None:
        assistant = self._assistant(cwd)
        try:
            thread = await assistant.find_thread(session_id)
        except CortanaError as error:
            raise acp.RequestError(NOT_FOUND, str(error)) from None
        session = Session(session_id, thread, assistant)
        self._sessions[session_id] = session
        await self._replay(session)
        return schema.LoadSessionResponse()

    async def _replay(self, session: Session) -> None:
        """The stored conversation, sent again as the updates the editor would have seen."""
        stored = await session.assistant.memory.messages(session.thread)
        calls: dict[str, ToolCall] = {}
        for row in stored:
            message: Message = row.message
            if message.role == "user" and is_users_own(message):
                await self._send(session, acp.update_user_message_text(strip_turn_context(message.content)))
            elif message.role == "assistant":
                if message.content:
                    await self._send(session, acp.update_agent_message_text(message.content))
                for call in message.tool_calls:
                    calls[call.id] = call
            elif message.role == "tool" and message.tool_call_id in calls:
                call = calls[message.tool_call_id]
                status: schema.ToolCallStatus = "failed" if message.is_error else "completed"
                await self._send(session, self._call_started(call, _tool_named(session, call.name), session, status))
                shown = [acp.tool_content(acp.text_block(message.content))]
                await self._send(session, acp.update_tool_call(call.id, raw_output=message.content, content=shown))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> schema.ListSessionsResponse:
        if cwd is None:
            return schema.ListSessionsResponse(sessions=[])
        assistant = self._assistant(cwd)
        found = await assistant.memory.threads(RESOURCE_ID)
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=thread.thread_id,
                    cwd=str(assistant.workspace),
                    updated_at=datetime.fromtimestamp(updated, UTC).isoformat(),
                )
                for thread, updated in found
            ]
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> schema.ResumeSessionResponse:
        assistant = self._assistant(cwd)
        try:
            thread = await assistant.find_thread(session_id)
        except CortanaError as error:
            raise acp.RequestError(NOT_FOUND, str(error)) from None
        self._sessions[session_id] = Session(session_id, thread, assistant)
        return schema.ResumeSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse | None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return schema.CloseSessionResponse()
        if session.turn is not None and not session.turn.done():
            session.turn.cancel()
            await asyncio.gather(session.turn, return_exceptions=True)
        await session.assistant.background.stop_thread(session.thread)  # what it started in the background ends
        return schema.CloseSessionResponse()

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> schema.ForkSessionResponse:
        raise acp.RequestError.method_not_found("session/fork")

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse | None:
        raise acp.RequestError.method_not_found("session/set_config_option")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse | None:
        raise acp.RequestError.method_not_found("session/set_mode")

    # -- a turn -------------------------------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[ContentBlock], **kwargs: Any) -> schema.PromptResponse:
        session = self._session(session_id)
        if session.turn is not None and not session.turn.done():
            raise acp.RequestError(INVALID_REQUEST, "a turn is running in this session: cancel it first")
        text = prompt_text(prompt)
        context = contextvars.copy_context()
        context.run(_SESSION.set, session)
        session.state = None
        session.turn = asyncio.get_running_loop().create_task(self._turn(session, text), context=context)
        try:
            await asyncio.wait({session.turn})
        except asyncio.CancelledError:  # the connection closes
            session.turn.cancel()
            raise
        if session.turn.cancelled():
            return schema.PromptResponse(stop_reason="cancelled")
        error = session.turn.exception()
        if isinstance(error, CortanaError):
            raise acp.RequestError(INTERNAL_ERROR, str(error))
        return schema.PromptResponse(stop_reason=session.turn.result())

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.turn is not None and not session.turn.done():
            session.turn.cancel()

    async def _turn(self, session: Session, text: str) -> schema.StopReason:
        """The prompt through the assistant's one door (``Assistant.turn``: hooks, routing, fitting, plan mode, the
        turn's checkpoint), its events sent as session updates."""
        from cortana.agent.events import RunFinished, ToolCallFinished
        from cortana.turn.events import (
            FixFinished,
            FixFound,
            FixProgress,
            FixStarted,
            ImagesAttached,
            PromptCut,
            TurnFinished,
            TurnHeld,
        )

        if not text.strip():
            return "end_turn"
        stop: schema.StopReason = "end_turn"
        fix = _FixView(lambda update: self._send(session, update), session)
        try:
            async with closing(session.assistant.turn(text, thread=session.thread)) as events:
                async for event in events:
                    session.state = session.state or turn_state()
                    if isinstance(event, ToolCallFinished):
                        await self._tool_finished(session, event)
                    elif isinstance(event, RunFinished):
                        stop = "max_tokens" if event.result.stop_reason == "length" else "end_turn"
                    elif isinstance(event, PromptCut | ImagesAttached):
                        await self._send(session, acp.update_agent_thought_text(event.note))
                    elif isinstance(event, TurnHeld):
                        note = event.message
                        await self._send(session, acp.update_agent_message_text(note))
                        stop = "refusal"
                    elif isinstance(event, FixStarted):
                        await fix.started(event.request)
                    elif isinstance(event, FixProgress):
                        fix.progress(event.progress)
                    elif isinstance(event, FixFinished):
                        await fix.finished(event.outcome)
                    elif not isinstance(event, FixFound | TurnFinished):
                        await self._event(session, event)
            return stop
        except asyncio.CancelledError:
            await self._put_back(session)
            raise

    async def _event(self, session: Session, event: RunEvent) -> None:
        from cortana.agent.events import TextDelta, ThinkingDelta, ToolCallProgress, ToolCallStarted

        if isinstance(event, TextDelta) and event.text:
            await self._send(session, acp.update_agent_message_text(event.text))
        elif isinstance(event, ThinkingDelta) and event.text:
            await self._send(session, acp.update_agent_thought_text(event.text))
        elif isinstance(event, ToolCallStarted):
            await self._send(session, self._call_started(event.call, event.tool, session, "in_progress"))
        elif isinstance(event, ToolCallProgress):
            shown = [acp.tool_content(acp.text_block(event.text))]
            await self._send(session, acp.update_tool_call(event.call.id, status="in_progress", content=shown))

    def _call_started(
        self, call: ToolCall, tool: Tool | None, session: Session, status: schema.ToolCallStatus
    ) -> schema.ToolCallStart:
        return acp.start_tool_call(
            call.id,
            call_title(call),
            kind=tool.kind if tool is not None else "other",
            status=status,
            locations=_locations(call, session.assistant.workspace),
            raw_input=call.arguments or call.raw_arguments,
        )

    async def _tool_finished(self, session: Session, event: Any) -> None:
        call, result = event.call, event.result
        content: list[Any] = [acp.tool_content(acp.text_block(result.content))]
        tool = event.tool
        path = call.arguments.get(tool.writes) if tool is not None and tool.writes else None
        if not result.is_error and isinstance(path, str):  # a file the tool says it writes: its diff
            target = (session.assistant.workspace / path).resolve()
            written = self._written(session)
            if target in written:
                before = written[target]
                new = await self._text_now(session, target)
                if new is not None:
                    content.insert(0, acp.tool_diff_content(str(target), new, before))
        await self._send(
            session,
            acp.update_tool_call(
                call.id, status="failed" if result.is_error else "completed", content=content, raw_output=result.content
            ),
        )

    async def _text_now(self, session: Session, path: Path) -> str | None:
        """``path``'s text as the editor holds it (when it offers that), else on disk."""
        if self.can_read and self.conn is not None:
            with contextlib.suppress(Exception):  # a diff is worth showing, not worth failing the turn over
                return (await self.conn.read_text_file(session_id=session.id, path=str(path))).content
        return await asyncio.to_thread(_text_of, path)

    def _written(self, session: Session) -> dict[Path, str | None]:
        """The files the session's running turn wrote, each as it was before (None: the turn made it), from the
        turn's checkpoint."""
        state, checkpoints = session.state, session.assistant.checkpoints
        if state is None or state.checkpoint is None:
            return {}
        files = checkpoints.turn_files(state.checkpoint)
        root = session.assistant.workspace
        return {root / path: None if before is None else valid_text(before.decode("utf-8", "replace"))
                for path, before in files.items()}  # fmt: skip

    async def _put_back(self, session: Session) -> None:
        """Files the cancelled turn wrote, as they were before it (its checkpoint: what the editor held, through the
        editor when it writes them), by Cortana's one writer: a file or folder a command swapped for a symlink
        meanwhile is refused, never followed, and the editor is told which files were not put back and why."""
        tree = SafeTree(session.assistant.workspace)
        refused: dict[str, str] = {}
        written = self._written(session)
        for path, text in written.items():
            shown = tree.shown(path)
            try:
                if text is None:
                    await asyncio.to_thread(tree.unlink, path)
                elif self.can_write and self.conn is not None:
                    info = await asyncio.to_thread(tree.lstat, path)  # no symlink on the way to hand the editor
                    if info is not None and stat.S_ISLNK(info.st_mode):
                        raise PathRefused(shown, "is now a symlink; Cortana does not write through symlinks")
                    await self.conn.write_text_file(session_id=session.id, path=str(path), content=text)
                else:
                    await asyncio.to_thread(tree.write_text, path, text)
            except PathRefused as error:
                refused[shown] = error.reason
            except Exception as error:  # one file that cannot be put back does not keep the others
                refused[shown] = str(error) or type(error).__name__
        state = session.state
        if state is not None and state.checkpoint is not None and written and not refused:
            session.assistant.checkpoints.drop(state.checkpoint, thread=session.thread)  # nothing left to undo
        session.state = None
        if refused:
            lines = "\n".join(f"- {path}: {why}" for path, why in refused.items())
            log.warning("after a cancelled turn, not put back:\n%s", lines)
            with contextlib.suppress(Exception):  # the editor may be gone; the log has it
                await self._send(session, acp.update_agent_message_text(f"\nNot put back after the cancel:\n{lines}"))

    # -- the gate ---------------------------------------------------------------------------------------------

    async def _approve(self, call: ToolCall, tool: Tool, reason: str | None, scope: Scope | None) -> PermissionDecision:
        session, conn = _SESSION.get(None), self.conn
        if session is None or conn is None:
            return PermissionDecision.deny("nobody is connected to ask")
        options = [schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once")]
        if scope is not None:
            options.append(
                schema.PermissionOption(
                    option_id="allow_always", name=f"Always allow {scope.label}", kind="allow_always"
                )
            )
        options += [
            schema.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
            schema.PermissionOption(option_id="reject_always", name="Reject for this session", kind="reject_always"),
        ]
        update = schema.ToolCallUpdate(
            tool_call_id=call.id,
            title=call_title(call) + (f" ({reason})" if reason else ""),
            kind=tool.kind,
            status="pending",
            raw_input=call.arguments or call.raw_arguments,
            locations=_locations(call, session.assistant.workspace),
        )
        try:
            response = await conn.request_permission(session_id=session.id, tool_call=update, options=options)
        except acp.RequestError as error:  # an editor that cannot ask: refused, and the model told why
            log.warning("the editor could not ask about %s: %s", call.name, error)
            return PermissionDecision.deny(f"the editor could not ask the user ({error}); it was not done")
        outcome = response.outcome
        if not isinstance(outcome, schema.AllowedOutcome):
            return PermissionDecision.deny("the user cancelled the question")
        if outcome.option_id == "allow_once":
            return PermissionDecision.allow()
        if outcome.option_id == "allow_always":
            return PermissionDecision.allow(remember=scope is not None)
        if outcome.option_id == "reject_always":
            return PermissionDecision.deny("the user denies this for the session", remember=True)
        return PermissionDecision.deny("the user declined")

    # -- sending ----------------------------------------------------------------------------------------------

    async def _send(self, session: Session, update: Any) -> None:
        if self.conn is not None:
            await self.conn.session_update(session_id=session.id, update=update)

    async def aclose(self) -> None:
        """Cancel running turns and close every folder's assistant, then the engine."""
        for session in self._sessions.values():
            if session.turn is not None and not session.turn.done():
                session.turn.cancel()
        turns = [s.turn for s in self._sessions.values() if s.turn is not None]
        await asyncio.gather(*turns, return_exceptions=True)
        try:
            for assistant in self._assistants.values():
                await assistant.aclose()
        finally:
            engine = self.client
            if not engine.done():
                engine.cancel()  # the editor left while the engine loaded: the embedded engine's process stops
            await asyncio.gather(engine, return_exceptions=True)
            if not engine.cancelled() and engine.exception() is None:
                await engine.result().aclose()


def _future(client: ModelClient | Awaitable[ModelClient]) -> asyncio.Future[ModelClient]:
    if inspect.isawaitable(client):
        return asyncio.ensure_future(client)
    done: asyncio.Future[ModelClient] = asyncio.get_running_loop().create_future()
    done.set_result(client)
    return done


def _text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


async def serve_acp(agent: CortanaAgent) -> None:
    """Serve ``agent`` on this process's stdin and stdout, pipes or files, until stdin ends.

    The lines go through :class:`~cortana.serve.stdio.StdioTransport`: the package's own stdio streams refuse a
    regular file (``cortana acp > out.jsonl``), and a line that is not a message is answered with JSON-RPC's
    error for it rather than a traceback on stderr.
    """
    try:
        await acp.run_agent(agent, StdioTransport())
    finally:
        await agent.aclose()

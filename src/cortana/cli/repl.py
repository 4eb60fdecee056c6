"""The interactive session: prompt_toolkit input, streamed Markdown, slash commands, shell mode.

- Enter sends; Alt-Enter (or Esc then Enter) starts a new line. History persists in
  ``.cortana/history``; Tab completes slash commands and file paths.
- Ctrl-C cancels the running turn (what was done so far is kept) and returns to the prompt;
  Ctrl-D or ``/exit`` leaves.
- ``!command`` runs in the workspace shell; the command and its output join the
  conversation, so the next prompt can refer to them.
"""

from __future__ import annotations

import asyncio
import difflib
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

try:
    import termios
except ImportError:  # not a POSIX system: no terminal modes to fix
    termios = None  # type: ignore[assignment]

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from cortana.agent.agent import Agent
from cortana.agent.events import ModelCallFinished, TextDelta
from cortana.cli.display import describe_client
from cortana.display import printable
from cortana.errors import UserError
from cortana.knowledge.graph import KnowledgeGraph
from cortana.memory.sqlite import SQLiteMemory
from cortana.memory.store import private_file, private_folder
from cortana.messages import Message, ThreadRef
from cortana.prompts import strip_turn_context
from cortana.tools import ToolGroup

__all__ = ["COMMANDS", "Repl"]

COMMANDS = {
    "/help": "this list",
    "/compact": "summarize the conversation so far (optionally: /compact FOCUS)",
    "/clear": "start a new thread",
    "/threads": "list this workspace's threads",
    "/resume": "continue a thread: /resume NUMBER (from /threads)",
    "/model": "show the engine and model; /model NAME switches (Ollama, Docker Model Runner)",
    "/tools": "list the tools the assistant can use",
    "/memory": "show the working memory",
    "/graph": "show the code graph's state; /graph rebuild rebuilds it now",
    "/exit": "leave (Ctrl-D works too)",
}
SHELL_OUTPUT_LIMIT = 8000


def _signals_from_keyboard() -> Callable[[], None]:
    """Make Ctrl-C raise SIGINT while a turn runs; returns a function restoring the terminal.

    prompt_toolkit leaves some terminals (TERM=dumb) in raw mode after reading a line, where
    Ctrl-C is only a character in the input.
    """
    if termios is None:
        return lambda: None
    try:
        descriptor = sys.stdin.fileno()
        saved = termios.tcgetattr(descriptor)
    except (OSError, ValueError, termios.error):
        return lambda: None
    wanted = list(saved)
    wanted[3] |= termios.ISIG
    termios.tcsetattr(descriptor, termios.TCSANOW, wanted)
    return lambda: termios.tcsetattr(descriptor, termios.TCSANOW, saved)


class _Completer(Completer):
    """Slash commands at the start of a line, file paths elsewhere."""

    def __init__(self) -> None:
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for command in COMMANDS:
                if command.startswith(text):
                    yield Completion(command, start_position=-len(text), display_meta=COMMANDS[command])
            return
        word = text.split()[-1] if text.split() and not text.endswith(" ") else ""
        if word.lstrip("!").startswith(("/", ".", "~")) or "/" in word:
            path_document = Document(word.lstrip("!"), len(word.lstrip("!")))
            yield from self.paths.get_completions(path_document, event)


class Repl:
    """One interactive session on ``agent`` in ``workspace``."""

    def __init__(
        self,
        agent: Agent,
        memory: SQLiteMemory,
        workspace: Path,
        console: Console,
        *,
        graph: KnowledgeGraph | None = None,
    ) -> None:
        self.agent = agent
        self.graph = graph
        self._graph_state: str | None = None
        self.memory = memory
        self.workspace = workspace
        self.console = console
        self.out = Console()
        self.thread = ThreadRef(resource_id="cli", thread_id=uuid.uuid4().hex)
        self._listed: list[ThreadRef] = []
        self.handlers: dict[str, Callable[[str], Awaitable[bool]]] = {
            "/help": self._help,
            "/compact": self._compact,
            "/clear": self._clear,
            "/threads": self._threads,
            "/resume": self._resume,
            "/model": self._model,
            "/tools": self._tools,
            "/memory": self._memory,
            "/graph": self._graph,
            "/exit": self._exit,
        }

    async def run(self) -> int:
        """Read and answer until ``/exit`` or end of input."""
        history = private_file(private_folder(self.workspace / ".cortana") / "history")
        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)), completer=_Completer(), key_bindings=bindings, multiline=False
        )
        self.console.print("[dim]/help for commands · !cmd runs a shell command · Ctrl-C cancels · Ctrl-D leaves[/dim]")
        if self.graph is not None:
            if self.graph.graph_file.exists():
                self._graph_state = "refreshing"  # the quiet refresh of a graph from an earlier session
            else:
                self.console.print("[dim]Building the code graph of this folder in the background (graphify)…[/dim]")
                self._graph_state = "building"
            self.graph.start()
        while True:
            self._note_graph_change()
            try:
                line = await session.prompt_async("› ")
            except KeyboardInterrupt:
                continue
            except EOFError:
                return 0
            line = line.strip()
            if not line:
                continue
            try:
                if not await self._handle(line):
                    return 0
            except Exception as exc:  # whatever a model, a tool or a stored message holds, the session goes on
                self.console.print(Text(printable(f"{type(exc).__name__}: {exc}"), style="red"))

    async def _handle(self, line: str) -> bool:
        """Act on one line; False to leave."""
        if line.startswith("/"):
            return await self._command(line)
        if line.startswith("!"):
            await self._shell(line[1:].strip())
        else:
            await self._turn(line)
        return True

    async def _turn(self, prompt: str) -> None:
        """Run one turn; Ctrl-C cancels it and keeps what was done."""
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(self._stream(prompt))
        loop.add_signal_handler(signal.SIGINT, task.cancel)
        restore = _signals_from_keyboard()
        try:
            await task
        except asyncio.CancelledError:
            self.console.print("\n[yellow]cancelled[/yellow] [dim](the steps already done are kept)[/dim]")
        except Exception as exc:  # the session outlives a failed turn; the message is stored
            self.console.print(Text(printable(f"{type(exc).__name__}: {exc}"), style="red"))
        finally:
            restore()
            loop.remove_signal_handler(signal.SIGINT)

    async def _stream(self, prompt: str) -> None:
        text = ""
        live: Live | None = None
        try:
            async for event in self.agent.run_stream(prompt, thread=self.thread):
                if isinstance(event, TextDelta) and event.text:
                    text += printable(event.text)
                    if live is None:
                        live = Live(Markdown(text), console=self.out, refresh_per_second=8, vertical_overflow="visible")
                        live.start()
                    else:
                        live.update(Markdown(text))
                elif isinstance(event, ModelCallFinished) and live is not None:
                    live.update(Markdown(text))
                    live.stop()
                    live, text = None, ""
        finally:
            if live is not None:
                live.stop()

    async def _shell(self, command: str) -> None:
        if not command:
            self.console.print("[yellow]![/yellow] needs a command, e.g. !ls")
            return
        completed = await asyncio.to_thread(
            subprocess.run, command, shell=True, cwd=self.workspace, capture_output=True, text=True, errors="replace"
        )
        output = (completed.stdout + completed.stderr).rstrip()
        self.out.print(Text(printable(output)), highlight=False)
        if completed.returncode:
            self.console.print(f"[dim]exit code {completed.returncode}[/dim]")
        shown = output if len(output) <= SHELL_OUTPUT_LIMIT else output[:SHELL_OUTPUT_LIMIT] + "\n[... cut]"
        note = Message(
            role="user",
            name="shell",
            content=f"I ran `{command}` in the shell (exit code {completed.returncode}). Output:\n```\n{shown}\n```",
        )
        await self.memory.append_messages(self.thread, [note])

    async def _command(self, line: str) -> bool:
        name, _, argument = line.partition(" ")
        handler = self.handlers.get(name)
        if handler is None:
            close = difflib.get_close_matches(name, COMMANDS, n=1)
            hint = f" Did you mean {close[0]}?" if close else " /help lists them."
            self.console.print(Text(printable(f"Unknown command {name}.{hint}")))
            return True
        return await handler(argument.strip())

    async def _help(self, _: str) -> bool:
        for command, meaning in COMMANDS.items():
            self.out.print(f"  {command:<10} {meaning}", highlight=False)
        self.out.print("  !command   run a shell command; its output joins the conversation", highlight=False)
        return True

    async def _compact(self, focus: str) -> bool:
        try:
            summary = await self.agent.compact(self.thread, focus=focus or None)
        except UserError as exc:
            self.console.print(Text(printable(str(exc))))
            return True
        self.console.print(f"[green]compacted[/green] [dim]({len(summary.content):,} characters of summary)[/dim]")
        return True

    async def _clear(self, _: str) -> bool:
        self.thread = ThreadRef(resource_id="cli", thread_id=uuid.uuid4().hex)
        self.console.print("[green]new thread[/green]")
        return True

    async def _threads(self, _: str) -> bool:
        self._listed = [thread for thread, _ in await self.memory.threads("cli")]
        for number, thread in enumerate(self._listed, start=1):
            stored = await self.memory.messages(thread)
            first = next((s.message.content for s in stored if s.message.role == "user"), "")
            current = " (current)" if thread == self.thread else ""
            shown = strip_turn_context(first).strip().splitlines()
            title = printable(shown[0][:70]) if shown else "(empty)"
            self.out.print(Text(f"  {number:>2}. {title}{current}"), highlight=False)
        if not self._listed:
            self.out.print("  no threads yet")
        return True

    async def _resume(self, argument: str) -> bool:
        if not self._listed:
            self._listed = [thread for thread, _ in await self.memory.threads("cli")]
        if not argument.isdigit() or not 1 <= int(argument) <= len(self._listed):
            self.console.print("Usage: /resume NUMBER, with a number from /threads.")
            return True
        self.thread = self._listed[int(argument) - 1]
        self.console.print(f"[green]resumed thread {argument}[/green]")
        return True

    async def _model(self, name: str) -> bool:
        client = await self.agent.client()
        if name:
            if not client.can_switch_model:
                self.console.print(
                    Text(
                        printable(
                            f"{client.engine} serves one model; restart with `cortana --model NAME` to use another."
                        )
                    )
                )
                return True
            available = await client.list_models() if client.can_list_models else []
            if available and name not in available:
                close = difflib.get_close_matches(name, available, n=1)
                hint = f" Did you mean {close[0]}?" if close else f" Available: {', '.join(available)}."
                self.console.print(Text(printable(f"No model {name} on this engine.{hint}")))
                return True
            await client.switch_model(name)
        self.out.print(Text(describe_client(client)), highlight=False)
        return True

    async def _tools(self, _: str) -> bool:
        for tool in self.agent.tools:
            summary = tool.description.splitlines()[0] if tool.description else ""
            self.out.print(Text(printable(f"  {tool.name:<14} {summary}")), highlight=False)
        for group in self.agent.tool_groups:
            tools = await group.ensure_loaded() if group.eager else group.tools
            names = ", ".join(t.name for t in tools) or "(loaded when the model asks)"
            self.out.print(Text(printable(f"  {group.name + ':':<14} {group.description} — {names}")), highlight=False)
        for extension in self.agent.extensions:
            for item in extension.tools(self.thread):
                listed = item.tools if isinstance(item, ToolGroup) else [item]
                names = ", ".join(t.name for t in listed)
                self.out.print(Text(printable(f"  {item.name + ':':<14} {names}")), highlight=False)
        return True

    async def _memory(self, _: str) -> bool:
        text = await self.memory.get_working_memory(self.thread)
        self.out.print(Text(printable(text or "(working memory is empty)")), highlight=False)
        return True

    def _note_graph_change(self) -> None:
        """One dim line before the prompt when the graph started or finished a rebuild, or went stale."""
        if self.graph is None:
            return
        status = self.graph.status()
        quiet = self._graph_state == "refreshing" and status.state in ("building", "ready")
        if quiet or status.state == self._graph_state:
            self._graph_state = "refreshing" if quiet and status.state == "building" else status.state
            return
        self._graph_state = status.state
        notes = {
            "building": "code graph: rebuilding after changes (queries use the previous graph)",
            "ready": f"code graph {status.summary()}",
            "stale": "code graph: stale (the last rebuild failed; /graph says why)",
            "failed": "code graph: the build failed (/graph says why)",
            "no code": "code graph: no code files in this folder yet",
        }
        if status.state in notes:
            self.console.print(Text(printable(notes[status.state]), style="dim"))

    async def _graph(self, argument: str) -> bool:
        if self.graph is None:
            self.out.print("The code graph is off (graphify missing, graphify.enabled false, or the home folder).")
            return True
        if argument == "rebuild":
            with self.console.status("Rebuilding the code graph…", spinner="dots"):
                await self.graph.rebuild()
        elif argument:
            self.console.print("Usage: /graph, or /graph rebuild.")
            return True
        status = self.graph.status()
        self._graph_state = status.state
        lines = [status.summary(), f"graph file: {self.graph.graph_file}", f"context: {self.graph.context_mode}"]
        if status.last_error:
            lines.append(f"last error: {status.last_error[-600:]}")
        for line in lines:
            self.out.print(Text(printable(line)), highlight=False)
        return True

    async def _exit(self, _: str) -> bool:
        return False

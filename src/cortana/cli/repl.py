"""The interactive session: prompt_toolkit input, streamed Markdown, slash commands, shell mode.

- Enter sends; Alt-Enter (or Esc then Enter) starts a new line. History persists in
  ``.cortana/history``; Tab completes slash commands and file paths.
- Ctrl-C cancels the running turn (what was done so far is kept) and returns to the prompt;
  Ctrl-D or ``/exit`` leaves.
- ``!command`` runs in the workspace shell; the command and its output join the
  conversation, so the next prompt can refer to them.
- The heartbeat (``heartbeat:`` in cortana.yml, off with ``--no-heartbeat``) checks in
  while the user is idle; a check-in that says something is printed above the prompt,
  with what the user was typing left as it was. It never runs while a turn runs, input
  is waiting, the prompt holds half-typed text or an approval question is open, and a
  line sent while one runs interrupts it. ``/heartbeat`` shows its schedule.
- ``/voice on|off`` reads replies and check-ins aloud (espeak-ng); a new turn stops it.
- ``/good``, ``/bad``, ``/learned``, ``/teach`` and ``/skills`` are the learning commands
  (``cli/learning.py``); while teaching, plain lines are notes and ``!`` commands are recorded.
- ``/NAME`` of one of the user's own commands (``cortana.turn.commands``) is a turn like any message: the assistant
  expands it; the session only lists them (``/help``, Tab) and says why one it cannot use did nothing.
"""

from __future__ import annotations

import asyncio
import difflib
import signal
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.text import Text

from cortana.agent.turnstats import TurnStats
from cortana.cli.checkpoints import CheckpointCommands
from cortana.cli.display import describe_client
from cortana.cli.learning import LEARNING_COMMANDS, LearningCommands
from cortana.cli.terminal import input_waiting, signals_from_keyboard
from cortana.companion.voice import INSTALL_HINT as VOICE_INSTALL_HINT
from cortana.display import printable
from cortana.errors import ConfigError, ToolError, UserError
from cortana.memory.store import private_file, private_folder
from cortana.messages import Message, ThreadRef, is_users_own
from cortana.prompts import strip_turn_context

# The prompt shows before these load (the agent, the heartbeat's check-ins, Markdown rendering):
# each is imported where it is first used, once the engine is loading or a reply streams.
if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.assistant import Assistant
    from cortana.cli.approval import TerminalApprover
    from cortana.cli.fix import TerminalFixer
    from cortana.companion.heartbeat import Beat, Heartbeat
    from cortana.turn.commands import UserCommands
    from cortana.turn.events import TurnResult

__all__ = ["COMMANDS", "Repl"]

COMMANDS = {
    "/help": "this list",
    "/compact": "summarize the conversation so far (optionally: /compact FOCUS)",
    "/clear": "start a new thread",
    "/threads": "list this workspace's threads",
    "/resume": "continue a thread: /resume NUMBER (from /threads)",
    "/plan": "plan mode: the assistant reads and proposes a plan, nothing changes until you accept it",
    "/undo": "put back the files the last turn changed (not what commands changed)",
    "/rewind": "list recent turns; /rewind N [code|chat|both] goes back to before turn N",
    "/model": "show the engine and model; /model NAME switches (Ollama, Docker Model Runner)",
    "/fix": "fix what the failing tests show, or /fix WHAT: patches tried in a scratch copy, the tests choose",
    "/tools": "list the tools the assistant can use",
    "/permissions": "what runs without asking, and the answers remembered this session; /permissions forget N",
    "/memory": "show the working memory",
    "/context": "what the model is given besides the conversation: instructions, the project's AGENTS.md, skills",
    "/graph": "show the code graph's state; /graph rebuild rebuilds it now",
    "/heartbeat": "show when the assistant checks in next, its active hours and unanswered check-ins",
    "/voice": "read replies aloud: /voice on, /voice off",
    "/stats": "where the last turn's time went: first token, prompt tokens read and cached, tokens/s",
    "/ps": "the commands the assistant runs in the background; /ps stop ID stops one",
    **LEARNING_COMMANDS,
    "/exit": "leave (Ctrl-D works too)",
}
SHELL_OUTPUT_LIMIT = 8000

T = TypeVar("T")


async def until_ctrl_c(task: asyncio.Future[T]) -> T:
    """Await ``task``; Ctrl-C cancels it (``CancelledError``) instead of ending the session."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, task.cancel)
    restore = signals_from_keyboard()
    try:
        return await task
    finally:
        restore()
        loop.remove_signal_handler(signal.SIGINT)


def _outcome(beat: Beat) -> str:
    """What became of a beat, for ``/heartbeat``."""
    if beat.interrupted:
        return "interrupted (it runs again at the next free moment)"
    if beat.failed:
        return "failed (.cortana/cortana.log says why)"
    if beat.kind == "reflect":
        return "working memory updated" if beat.reply else "nothing new to reflect on"
    return "shown" if beat.delivered else "nothing due (HEARTBEAT_OK)"


class _Completer(Completer):
    """Slash commands at the start of a line (the built-in ones, then the user's own), file paths elsewhere."""

    def __init__(self, commands: UserCommands | None = None) -> None:
        self.paths = PathCompleter(expanduser=True)
        self.commands = commands

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for command in COMMANDS:
                if command.startswith(text):
                    yield Completion(command, start_position=-len(text), display_meta=COMMANDS[command])
            for own in self.commands.listing().commands if self.commands is not None else ():
                if f"/{own.name}".startswith(text):
                    meta = printable(" ".join(part for part in (own.argument_hint, own.description) if part))
                    yield Completion(f"/{own.name}", start_position=-len(text), display_meta=meta or own.source)
            return
        word = text.split()[-1] if text.split() and not text.endswith(" ") else ""
        if word.lstrip("!").startswith(("/", ".", "~")) or "/" in word:
            path_document = Document(word.lstrip("!"), len(word.lstrip("!")))
            yield from self.paths.get_completions(path_document, event)


class Repl:
    """One interactive session on ``agent`` in ``workspace``."""

    def __init__(
        self,
        assistant: Assistant,
        console: Console,
        *,
        loading: asyncio.Future[Agent] | None = None,
        approver: TerminalApprover | None = None,
        fixer: TerminalFixer | None = None,
        verbose: bool = False,
        ready_note: Callable[[Agent], str] | None = None,
    ) -> None:
        """Args:
        assistant: what the session talks to (its memory, graph, voice, heartbeat settings, learning).
        console: where notes and progress go (stderr); answers go to stdout.
        loading: the agent still to come (the engine loading: the prompt shows at once); None: the assistant's
            (built already, or built while the prompt shows).
        approver: the terminal's approvals (the heartbeat waits while one is open).
        fixer: the fix workflow's terminal side (``/fix``, and change requests sent to it).
        verbose: a line of where each turn's time went.
        ready_note: what to say above the prompt once the engine is up.
        """
        self.assistant = assistant
        self._agent: Agent | None = assistant.ready_agent if loading is None else None
        self._loading: asyncio.Future[Agent] | None = loading
        self._engine_failed: BaseException | None = None
        self._ready_note = ready_note
        self._when_ready: asyncio.Task[None] | None = None
        self.verbose = verbose
        self.last_stats: TurnStats | None = None
        self.heartbeat_settings = assistant.heartbeat_settings
        self.local_time = assistant.local_time
        self.voice = assistant.voice
        self.approver = approver
        self.fixer = fixer
        self.heartbeat: Heartbeat | None = None
        self._session: PromptSession[str] | None = None
        self._busy = False
        self.graph = assistant.graph
        self._graph_state: str | None = None
        self.memory = assistant.memory
        self.workspace = assistant.workspace
        self.console = console
        self.out = Console()
        self._listed: list[ThreadRef] = []
        self._answer = ""
        """The last turn's answer."""
        self.plan_mode = False
        """Plan mode (``/plan``): each turn is a plan turn until a plan is accepted."""
        self._hook_start: asyncio.Future[None] | None = None
        self.handlers: dict[str, Callable[[str], Awaitable[bool]]] = {
            "/help": self._help,
            "/compact": self._compact,
            "/clear": self._clear,
            "/threads": self._threads,
            "/resume": self._resume,
            "/model": self._model,
            "/fix": self._fix,
            "/tools": self._tools,
            "/permissions": self._permissions,
            "/memory": self._memory,
            "/plan": self._plan,
            "/context": self._context,
            "/graph": self._graph,
            "/heartbeat": self._heartbeat,
            "/voice": self._voice,
            "/stats": self._stats,
            "/ps": self._ps,
            "/exit": self._exit,
        }
        self.learning = LearningCommands(
            lambda: self.agent,
            assistant.experience,
            assistant.skills,
            assistant.workspace,
            console,
            self.out,
            lambda: self.thread,
            self._ask,
            assistant.checkpoints,
        )
        self.handlers.update(self.learning.handlers())

        def switch(thread: ThreadRef) -> None:
            self.thread = thread

        self.checkpoint_commands = CheckpointCommands(assistant, self.out, self._ask, lambda: self.thread, switch)
        self.handlers.update(self.checkpoint_commands.handlers())

    @property
    def thread(self) -> ThreadRef:
        """The conversation the session continues (the assistant's: ``/clear`` and ``/resume`` change it)."""
        return self.assistant.thread

    @thread.setter
    def thread(self, thread: ThreadRef) -> None:
        self.assistant.use_thread(thread)

    @property
    def agent(self) -> Agent:
        """The session's agent (a line that needs it first waits for the engine: ``_engine_ready``)."""
        if self._agent is None:
            raise RuntimeError("the engine is still loading")
        return self._agent

    async def run(self) -> int:
        """Read and answer until ``/exit`` or end of input.

        Given the agent still to come (the engine loading), the prompt shows at once; a line that
        needs the engine waits for it, with a note.
        """
        history = private_file(private_folder(self.workspace / ".cortana") / "history")
        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=_Completer(self.assistant.commands),
            key_bindings=bindings,
            multiline=False,
        )
        self._session = session
        self.console.print("[dim]/help for commands · !cmd runs a shell command · Ctrl-C cancels · Ctrl-D leaves[/dim]")
        if self.graph is not None:
            if self.graph.graph_file.exists():
                self._graph_state = "refreshing"  # the quiet refresh of a graph from an earlier session
            else:
                self.console.print("[dim]Building the code graph of this folder in the background (graphify)…[/dim]")
                self._graph_state = "building"
            self.graph.start()
        if self.assistant.hooks:  # the user's session_start hooks, beside the prompt (they never hold it up)
            self._hook_start = asyncio.ensure_future(self.assistant.start_session(self.thread))
        if self._agent is None and self._loading is None:
            self._loading = asyncio.ensure_future(self.assistant.agent())
        if self._loading is None:
            self.heartbeat = await self._start_heartbeat()
        else:
            self.console.print("[dim]The engine is loading; type away, your first message waits for it.[/dim]")
            self._when_ready = asyncio.ensure_future(self._engine_loaded(self._loading))
        try:
            code = await self._read(session)
            return 1 if self._engine_failed is not None else code
        finally:
            if self._when_ready is not None:
                self._when_ready.cancel()  # still loading when the user left; a no-op once done
                await asyncio.gather(self._when_ready, return_exceptions=True)
            if self.heartbeat is not None:
                await self.heartbeat.stop()
            await self.voice.aclose()

    async def _engine_loaded(self, loading: asyncio.Future[Agent]) -> None:
        """Once the engine is up: say so above the prompt and start the heartbeat; if it failed, say why and leave."""
        try:
            self._agent = await asyncio.shield(loading)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._engine_failed = error
            failure = Text(printable(f"{type(error).__name__}: {error}"), style="red")
            await self._above_prompt(lambda: self.console.print(failure))
            if self._session is not None and self._session.app.is_running:
                self._session.app.exit(exception=EOFError())
            return
        if self._ready_note is not None:
            note = self._ready_note(self._agent)
            await self._above_prompt(lambda: self.console.print(Text(note, style="dim")))
        self.heartbeat = await self._start_heartbeat()

    async def _above_prompt(self, show: Callable[[], None]) -> None:
        """Print above the prompt, leaving what the user typed as it was."""
        if self._session is not None and self._session.app.is_running:
            await run_in_terminal(show)
        else:
            show()

    async def _engine_ready(self) -> bool:
        """Wait for the engine if it is still loading, with a note; False if Ctrl-C gave up waiting."""
        if self._agent is not None or self._when_ready is None or self._when_ready.done():
            return True
        self.console.print("[dim]waiting for the engine to finish loading… (Ctrl-C cancels)[/dim]")
        try:
            await until_ctrl_c(asyncio.ensure_future(asyncio.shield(self._when_ready)))
        except asyncio.CancelledError:
            self.console.print("[yellow]not sent[/yellow] [dim](the engine is still loading)[/dim]")
            return False
        return True

    async def _read(self, session: PromptSession[str]) -> int:
        while True:
            self._note_graph_change()
            try:
                line = await session.prompt_async(
                    "teach› " if self.learning.teaching else "plan› " if self.planning else "› "
                )
            except KeyboardInterrupt:
                continue
            except EOFError:
                return 0
            line = line.strip()
            if not line:
                continue
            self._busy = True
            try:
                if line.split(" ", 1)[0] not in ("/help", "/exit") and not line.startswith("!"):
                    if not await self._engine_ready():
                        continue
                    if self._engine_failed is not None:
                        return 1  # the engine did not start: the reason is on the screen
                await self._make_way(line)
                if not await self._handle(line):
                    return 0
            except Exception as exc:  # whatever a model, a tool or a stored message holds, the session goes on
                self.console.print(Text(printable(f"{type(exc).__name__}: {exc}"), style="red"))
            finally:
                self._busy = False

    # -- the heartbeat and the voice ----------------------------------------------------------

    def busy(self) -> bool:
        """Whether a check-in must wait: a turn runs, input waits, the prompt holds text, an approval is open."""
        half_typed = self._session is not None and bool(self._session.default_buffer.text)
        approving = self.approver is not None and self.approver.open
        return self._busy or half_typed or approving or input_waiting()

    async def _make_way(self, line: str) -> None:
        """The user comes first: a check-in under way and speech stop; a message resets the heartbeat's waits."""
        if self.heartbeat is not None:
            self.heartbeat.interrupt()
            if not line.startswith("/") or self._own_command(line):
                self.heartbeat.user_spoke()
        await self.voice.stop()

    async def _start_heartbeat(self) -> Heartbeat | None:
        return await self.assistant.start_heartbeat(
            on_message=self._show_check_in, is_busy=self.busy, thread=lambda: self.thread
        )

    async def _show_check_in(self, text: str) -> None:
        """Print a check-in above the prompt, leaving what the user typed as it was; speak it when voice is on."""

        from cortana.cli.markdown import HonestMarkdown as Markdown

        def show() -> None:
            self.console.print(Text("cortana checks in:", style="dim"))
            self.out.print(Markdown(printable(text)))

        await self._above_prompt(show)
        await self.voice.speak(text)

    async def _handle(self, line: str) -> bool:
        """Act on one line; False to leave."""
        if line.startswith("/"):
            return await self._command(line)
        if line.startswith("!"):
            await self._shell(line[1:].strip())
        elif self.learning.teaching is not None:
            self.learning.note(line)  # while teaching, a plain line is a note for the skill, not a message
        else:
            await self._turn(line)
        return True

    async def _ask(self, question: str) -> str:
        """One answer from the user at the prompt (teach mode's keep, edit or drop)."""
        if self._session is None:
            return ""
        try:
            return await self._session.prompt_async(question)
        except (EOFError, KeyboardInterrupt):
            return "drop"  # leaving, or Ctrl-C: nothing is written without a yes

    async def _fix(self, request: str) -> bool:
        if self.fixer is None:
            self.console.print("The fix workflow is not available in this session.")
            return True
        await self._one_turn(request, fix=True)
        return True

    async def _turn(self, prompt: str) -> None:
        """Run one turn through the assistant's one door (its hooks, its routing: a request to change code in a
        folder with tests goes through the fix workflow; plan mode; the turn's checkpoint)."""
        if self.planning:
            await self._plan_turns(prompt)
        else:
            await self._one_turn(prompt)

    @property
    def planning(self) -> bool:
        """Whether the session is in plan mode (``/plan``): only reading tools run until a plan is accepted."""
        return self.plan_mode

    async def _plan(self, argument: str) -> bool:
        """``/plan``: plan mode on (with a request: plan it at once), or off when it is on and nothing is asked."""
        if self.planning and not argument:
            self.plan_mode = False
            self.console.print("[green]plan mode off[/green]: writes, edits and commands work as usual")
            return True
        self.plan_mode = True
        if not argument:
            self.console.print(
                "[green]plan mode on[/green]: the assistant reads and proposes a plan; nothing changes until you "
                "accept it (/plan again leaves)"
            )
            return True
        await self._turn(argument)
        return True

    async def _plan_turns(self, prompt: str) -> None:
        """A plan for ``prompt``, then the user's word: accept (plan mode off, the plan carried out with the usual
        gate), edit (what should change: a revised plan), or reject (still in plan mode). A change in a folder with
        tests is planned by the fix workflow: the tests and where the change goes."""
        from cortana.repair.run import FixStatus
        from cortana.tools.hooks import ToolRules

        route = None if self.fixer is not None else False
        while True:
            result = await self._one_turn(prompt, plan=True, fix=route)
            if result is None or result.route == "held":
                return
            if result.fix is not None:
                if result.fix.result.status is FixStatus.PLANNED:
                    answer = (await self._ask("Accept the plan? [a]ccept / [r]eject: ")).strip().lower()
                    if answer in ("a", "accept", "y", "yes"):
                        self.plan_mode = False
                        self.console.print("[green]plan accepted[/green]: looking for the fix (plan mode off)")
                        await self._one_turn(prompt, fix=True)
                        return
                self.console.print("Still in plan mode (ask again, or /plan to leave it).")
                return
            answer = (await self._ask("Accept the plan? [a]ccept / [e]dit / [r]eject: ")).strip().lower()
            if answer in ("a", "accept", "y", "yes"):
                self.plan_mode = False
                self.console.print("[green]plan accepted[/green]: carrying it out (plan mode off)")
                await self._one_turn(ToolRules.plan_accepted(), fix=False)
                return
            if answer in ("e", "edit"):
                change = (await self._ask("What should change in the plan? ")).strip()
                if change and change != "drop":
                    prompt, route = f"Revise the plan: {change}", False
                    continue
            self.console.print("Plan not accepted; still in plan mode (ask again, or /plan to leave it).")
            return

    async def _one_turn(self, prompt: str, *, plan: bool = False, fix: bool | None = None) -> TurnResult | None:
        """One turn, rendered; Ctrl-C cancels it and keeps what was done (a fix's search leaves the files as they
        were). None when it was cancelled or failed (the message is stored either way)."""
        stats = self.last_stats = TurnStats()
        if self.fixer is None and fix is None:
            fix = False  # no terminal side for the fix workflow in this session: the agent answers
        result: TurnResult | None = None
        try:
            result = await until_ctrl_c(asyncio.ensure_future(self._stream(prompt, stats, plan=plan, fix=fix)))
        except asyncio.CancelledError:
            if self.fixer is not None and self.fixer.active:
                self.fixer.active = False
                self.console.print("\n[yellow]fix cancelled[/yellow] [dim](your files are as they were)[/dim]")
            else:
                self.console.print("\n[yellow]cancelled[/yellow] [dim](the steps already done are kept)[/dim]")
        except Exception as exc:  # the session outlives a failed turn; the message is stored
            self.console.print(Text(printable(f"{type(exc).__name__}: {exc}"), style="red"))
        if self.verbose:
            self.console.print(Text(stats.summary(), style="dim"), soft_wrap=True)
        return result

    async def _stream(
        self, prompt: str, stats: TurnStats, *, plan: bool = False, fix: bool | None = None
    ) -> TurnResult | None:
        """The turn's events on the screen: the answer as Markdown while it comes, the fix's lines and diff, a cut
        prompt or a held message in yellow."""
        from rich.live import Live

        from cortana.agent.events import ModelCallFinished, RunEvent, RunFinished, TextDelta
        from cortana.cli.markdown import HonestMarkdown as Markdown
        from cortana.streams import closing
        from cortana.turn.events import ImagesAttached, PromptCut, TurnFinished, TurnHeld

        text = ""
        live: Live | None = None
        result: TurnResult | None = None
        turn = self.assistant.turn(prompt, thread=self.thread, plan=plan, fix=fix, starting=False, attach=True)
        try:
            async with closing(turn) as events:
                async for event in events:
                    if self.fixer is not None and self.fixer.render(event):
                        continue
                    if isinstance(event, PromptCut):
                        self.console.print(Text(event.note, style="yellow"), soft_wrap=True)
                    elif isinstance(event, ImagesAttached):
                        self.console.print(Text(printable(event.note), style="dim"), soft_wrap=True)
                    elif isinstance(event, TurnHeld):
                        self.console.print(Text(printable(event.message), style="yellow"))
                    elif isinstance(event, TurnFinished):
                        result = event.result
                        self._answer = result.answer
                        continue
                    elif isinstance(event, RunEvent):
                        stats.handle(event)
                    if isinstance(event, RunFinished):
                        await self.voice.speak(event.result.output)
                    if isinstance(event, TextDelta) and event.text:
                        text += printable(event.text)
                        if live is None:
                            live = Live(
                                Markdown(text), console=self.out, refresh_per_second=8, vertical_overflow="visible"
                            )
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
        return result

    async def _shell(self, command: str) -> None:
        if not command:
            self.console.print("[yellow]![/yellow] needs a command, e.g. !ls")
            return
        # the user's own command, as typed (confined too with sandbox.shell_mode), under the keeper: no terminal to
        # drive, its output bounded and shown escaped, nothing it starts left running after it
        finished = await self.assistant.shell(command)
        returncode = -1 if finished.returncode is None else finished.returncode
        output = (finished.refused or finished.output).rstrip()
        self.learning.record_shell(command, returncode, output)
        self.out.print(Text(printable(output)), highlight=False)
        if returncode:
            self.console.print(f"[dim]exit code {returncode}[/dim]")
        shown = output if len(output) <= SHELL_OUTPUT_LIMIT else output[:SHELL_OUTPUT_LIMIT] + "\n[... cut]"
        note = Message(
            role="user",
            name="shell",
            content=f"I ran `{command}` in the shell (exit code {returncode}). Output:\n```\n{shown}\n```",
        )
        await self.memory.append_messages(self.thread, [note])

    async def _command(self, line: str) -> bool:
        name, _, argument = line.partition(" ")
        handler = self.handlers.get(name)
        if handler is not None:
            return await handler(argument.strip())
        try:
            own = self._own_command(line, strict=True)
        except ConfigError as error:  # its file cannot be used: which file, and why
            self.console.print(Text(printable(str(error)), style="red"), soft_wrap=True)
            return True
        if own:
            await self._turn(line)  # the assistant's turn expands it: one place for every front end
            return True
        name = line.split(maxsplit=1)[0]
        ignored = self.assistant.commands.ignored(name[1:])
        if ignored is not None:
            note = f"{name} is this folder's command ({ignored}), ignored: the folder is not trusted"
            self.console.print(Text(printable(f"{note} (run `cortana trust` here to use it).")), soft_wrap=True)
            return True
        yours = [f"/{command.name}" for command in self.assistant.commands.listing().commands]
        close = difflib.get_close_matches(name, [*COMMANDS, *yours], n=1)
        hint = f" Did you mean {close[0]}?" if close else " /help lists them."
        self.console.print(Text(printable(f"Unknown command {name}.{hint}")))
        return True

    def _own_command(self, line: str, *, strict: bool = False) -> bool:
        """Whether ``line`` is ``/NAME …`` of one of the user's own commands (``strict``: a command file that cannot
        be used raises its :class:`~cortana.errors.ConfigError`; else it counts as one)."""
        name = line.split(maxsplit=1)[0][1:] if line.startswith("/") else ""
        try:
            return bool(name) and self.assistant.commands.find(name) is not None
        except ConfigError:
            if strict:
                raise
            return True

    async def _stats(self, _: str) -> bool:
        if self.last_stats is None:
            self.console.print("No turn yet: /stats shows where the last one's time went.")
            return True
        for line in self.last_stats.lines():
            self.out.print(Text(line), highlight=False, soft_wrap=True)
        return True

    async def _help(self, _: str) -> bool:
        for command, meaning in COMMANDS.items():
            self.out.print(f"  {command:<10} {meaning}", highlight=False)
        self.out.print("  !command   run a shell command; its output joins the conversation", highlight=False)
        listing = self.assistant.commands.listing()
        if listing.commands:
            self.out.print("Your commands:", highlight=False)
        for own in listing.commands:
            usage = " ".join(part for part in (f"/{own.name}", own.argument_hint) if part)
            where = "yours" if own.source == "user" else "this folder's"
            line = f"  {usage:<10} {own.description or '(no description)'} ({where}: {own.path})"
            self.out.print(Text(printable(line)), highlight=False, soft_wrap=True)
        for note in listing.notes():
            self.console.print(Text(printable(note), style="yellow"), soft_wrap=True)
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
        clients = await self.memory.thread_clients("cli")
        for number, thread in enumerate(self._listed, start=1):
            stored = await self.memory.messages(thread)
            first = next((s.message.content for s in stored if is_users_own(s.message)), "")
            current = " (current)" if thread == self.thread else ""
            client = clients.get(thread.thread_id, "cli")
            where = f" [{printable(client)}]" if client != "cli" else ""  # started in an editor or over serve
            shown = strip_turn_context(first).strip().splitlines()
            title = printable(shown[0][:70]) if shown else "(empty)"
            self.out.print(Text(f"  {number:>2}. {title}{where}{current}"), highlight=False)
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
        from cortana.tools import ToolGroup

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

    async def _ps(self, argument: str) -> bool:
        """``/ps``: the background commands (id, how long, state, command); ``/ps stop ID`` stops one."""
        background = self.assistant.background
        words = argument.split()
        if words:
            if len(words) != 2 or words[0] != "stop":
                self.console.print("Usage: /ps, or /ps stop ID (from the list).")
                return True
            try:
                said = await background.stop(words[1])
            except ToolError as error:
                self.console.print(Text(printable(str(error))))
                return True
            self.out.print(Text(printable(said.split("\n", 1)[0])), highlight=False)
            return True
        if not background.commands:
            self.out.print("No command runs in the background (the assistant starts one with run_command).")
            return True
        for entry in background.commands:
            command = " ".join(entry.command.split())
            command = command if len(command) <= 70 else command[:69] + "…"
            line = f"  {entry.id:<5} {entry.age():>8}  {entry.state()}\n        {command}"
            self.out.print(Text(printable(line)), highlight=False)
        self.out.print(Text("/ps stop ID stops one; all of them stop when you leave.", style="dim"))
        return True

    async def _permissions(self, argument: str) -> bool:
        gate = self.agent.permissions
        if gate is None:
            self.out.print("No permission gate: every tool call runs without asking.", highlight=False)
            return True
        words = argument.split()
        if words:
            if len(words) != 2 or words[0] != "forget" or not words[1].isdigit():
                self.console.print("Usage: /permissions, or /permissions forget NUMBER (from the list).")
                return True
            try:
                scope, decision = gate.remembered()[int(words[1]) - 1]
                gate.forget(int(words[1]) - 1)
            except IndexError:
                self.console.print(Text(f"No remembered answer {words[1]}; /permissions lists them."))
                return True
            self.out.print(Text(printable(f"forgot: {decision.action} {scope.label} ({scope.tool})")), highlight=False)
            return True
        for action, label in (("allow", "run without asking"), ("deny", "always refused")):
            globs = [pattern for pattern, rule in gate.rules.items() if rule == action]
            if globs:
                shown = "every tool (--yes)" if "*" in globs else ", ".join(globs)
                self.out.print(Text(printable(f"{label}: {shown} (protected paths are still asked)")), highlight=False)
        remembered = gate.remembered()
        if not remembered:
            self.out.print("No answers remembered this session ('always' or 'deny always' in an approval).")
            return True
        self.out.print("Remembered this session:", highlight=False)
        for number, (scope, decision) in enumerate(remembered, start=1):
            line = f"  {number:>2}. {decision.action:<5} {scope.label} ({scope.tool})"
            self.out.print(Text(printable(line)), highlight=False)
        self.out.print("/permissions forget NUMBER drops one.", highlight=False)
        return True

    async def _context(self, _: str) -> bool:
        for part, line in self.assistant.context_rows():
            self.out.print(Text(f"  {part}: {printable(line)}"), highlight=False, soft_wrap=True)
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
        if status.state == "building" and not status.loaded:
            lines.append(
                "turns go on without the graph until it is ready (a first build of a big folder takes minutes)"
            )
        if status.skipped:
            shown = ", ".join(status.skipped[:8]) + (
                f" and {len(status.skipped) - 8} more" if len(status.skipped) > 8 else ""
            )
            lines.append(f"left out: {shown} (graphify.exclude in cortana.yml adds more)")
        if status.last_error:
            lines.append(f"last error: {status.last_error[-600:]}")
        for line in lines:
            self.out.print(Text(printable(line)), highlight=False)
        return True

    async def _heartbeat(self, _: str) -> bool:
        if self.heartbeat is None:
            why = "--no-heartbeat" if self.heartbeat_settings is None else "heartbeat.enabled: false in cortana.yml"
            self.out.print(Text(f"The heartbeat is off ({why})."), highlight=False)
            return True
        self.out.print(Text(printable(self.heartbeat.status())), highlight=False)
        for beat in self.heartbeat.history[-3:]:
            self.out.print(Text(f"  {beat.at:%H:%M} {beat.kind}: {_outcome(beat)}"), highlight=False)
        return True

    async def _voice(self, argument: str) -> bool:
        if argument not in ("", "on", "off"):
            self.console.print("Usage: /voice, /voice on, or /voice off.")
            return True
        if argument == "on" and not self.voice.available:
            self.out.print(Text(f"No text-to-speech engine was found; {VOICE_INSTALL_HINT}."), highlight=False)
            return True
        if argument:
            self.voice.enabled = argument == "on"
            if not self.voice.enabled:
                await self.voice.stop()
        self.out.print(Text(printable(f"voice: {self.voice.describe()}")), highlight=False)
        return True

    async def _exit(self, _: str) -> bool:
        return False

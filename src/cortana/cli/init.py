"""``cortana init``: a first AGENTS.md for the project, written from what the code graph knows, asked first.

The draft (the project's layout, the code the rest leans on, how its tests run, a place for its conventions) is
shown whole on stdout; it is written only when the user says yes on the terminal, or with ``--yes``. An AGENTS.md
that exists is never overwritten. No model is asked: the graph and the project's files say what the draft says,
so it is the same every time and costs seconds (see docs/cli.md, "AGENTS.md").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from cortana.assistant import workspace_graph, workspace_sandbox
from cortana.cli.session import settings_for
from cortana.display import printable
from cortana.knowledge.project_doc import starting_doc
from cortana.repair.testrun import find_test_command
from cortana.safefs import SafeTree

__all__ = ["run_init"]


async def run_init(args: argparse.Namespace) -> int:
    """Show the draft AGENTS.md and write it when the user agrees; the exit status says whether it was written."""
    workspace = Path.cwd()
    console = Console(stderr=True)
    target = workspace / "AGENTS.md"
    if target.exists() or target.is_symlink():
        console.print(Text(printable(f"{target} exists already; edit it, or remove it for a new draft.")))
        return 1
    settings = settings_for(workspace, console)
    graph = workspace_graph(workspace, settings, sandbox=workspace_sandbox(workspace, settings))
    index = None
    if graph is not None and graph.available:
        with console.status("Reading the code graph…", spinner="dots"):
            try:
                index = await graph.ensure()
            finally:
                await graph.aclose()
    else:
        console.print("code graph: off; the draft says less (graphify: pip install 'cortana[graph]')", style="dim")
    test = find_test_command(workspace, settings.test)
    draft = starting_doc(workspace, index, test_command=test.command if test is not None else None)
    print(draft, flush=True)
    if not args.yes:
        if not sys.stdin.isatty():
            console.print("cortana init: not written; run it in a terminal to be asked, or `cortana init --yes`.")
            return 1
        answer = await asyncio.to_thread(input, f"Write this to {target}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            console.print("Not written.")
            return 1
    try:  # exclusive, through Cortana's one writer: never over a file (or a symlink) made meanwhile
        SafeTree(workspace).write_text(target.name, draft, exclusive=True)
    except FileExistsError:
        console.print(Text(printable(f"{target} appeared meanwhile; not overwritten.")))
        return 1
    except OSError as error:
        console.print(Text(printable(f"{target} was not written: {error}")))
        return 1
    console.print(Text(printable(f"Wrote {target}. Cortana reads it from now on (`/context` shows it).")))
    return 0

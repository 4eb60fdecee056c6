"""``cortana doctor``: what was found, printed.

The rows are the assistant's (:meth:`cortana.assistant.Assistant.doctor_rows`); this module only prints them,
one aligned line each.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.text import Text

from cortana.assistant import Assistant
from cortana.cli.session import settings_for, start_engine
from cortana.display import printable

__all__ = ["run_command"]


async def run_command(command: str, args: argparse.Namespace) -> int:
    """``cortana doctor``."""
    workspace = Path.cwd()
    settings = settings_for(workspace, Console(stderr=True))
    console = Console()
    client = await start_engine(args, settings, Console(stderr=True))
    async with Assistant(workspace, settings, client=client, context_window=args.context_window) as assistant:
        rows = await assistant.doctor_rows()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        console.print(Text(printable(f"{name:<{width}}  {value}")), highlight=False, soft_wrap=True)
    return 0

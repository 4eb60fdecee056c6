"""``cortana "question"``: one answer (or one fix) in the terminal, heard and learned from before the command exits.

The turn is the assistant's one door (:meth:`cortana.Assistant.turn`); this module renders its events: the answer
streamed to stdout, the fix's lines, a cut prompt or a held message on stderr; with ``--plan`` in a terminal, the
plan, then the question whether to carry it out.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.text import Text

from cortana.cli.display import describe_client
from cortana.cli.fix import TerminalFixer
from cortana.display import printable
from cortana.repair.routing import is_change_request

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.agent.turnstats import TurnStats
    from cortana.assistant import Assistant
    from cortana.messages import ThreadRef
    from cortana.turn.events import TurnResult

__all__ = ["one_shot"]


async def one_shot(
    assistant: Assistant,
    fixer: TerminalFixer,
    args: argparse.Namespace,
    prompt: str,
    loaded: Callable[[], Awaitable[Agent]],
    *,
    fix: bool,
) -> int:
    """``cortana "question"``: one answer (or one fix), heard and learned from before the command exits."""
    from cortana.agent.turnstats import TurnStats

    console, settings = fixer.console, assistant.settings
    console.print(describe_client(await assistant.client()), style="dim", highlight=False, markup=False)
    agent = await loaded()
    warning = assistant.sandbox_warning()
    if warning is not None:  # said once: commands are asked, since nothing confines them here
        console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
    thread = assistant.thread
    planning = bool(getattr(args, "plan", False))
    if not fixer.has_tests and is_change_request(prompt) and not fix:
        console.print("fix: no tests found here to check a change with; the assistant works without them",
                      style="dim", markup=False)  # fmt: skip
    stats = TurnStats()
    turned = await _answer(assistant, fixer, prompt, thread, stats, plan=planning, fix=True if fix else None)
    if turned is None or turned.route == "held":
        return 1
    if turned.fix is not None:
        from cortana.repair.run import FixStatus

        if not planning or turned.fix.result.status is not FixStatus.PLANNED:
            return 0 if turned.complete else 1
    result = turned.run
    if planning and sys.stdin.isatty():
        answer = await asyncio.to_thread(input, "Accept the plan and carry it out? [y/N] ")
        if answer.strip().lower() in ("y", "yes"):
            from cortana.tools.hooks import ToolRules

            accepted = prompt if turned.fix is not None else ToolRules.plan_accepted()
            follow = await _answer(
                assistant, fixer, accepted, thread, stats, fix=turned.fix is not None, starting=False
            )
            if follow is None or follow.route == "held":
                return 1
            if follow.fix is not None:
                return 0 if follow.complete else 1
            result = follow.run
    if args.verbose:
        console.print(stats.summary(), style="dim", markup=False, highlight=False, soft_wrap=True)
    await assistant.voice.speak(result.output if result else "")
    distilling = result is not None and result.metrics.tool_calls >= settings.learning.min_tool_calls
    if assistant.experience is not None and distilling and agent.background.pending:
        # The answer is out; what it took is worth learning before the process ends.
        console.print("learning from this answer… (Ctrl-C skips)", style="dim", markup=False)
        await agent.background.wait(timeout=settings.learning.distill_wait_seconds)
    await assistant.voice.wait(timeout=120)  # a one-shot answer is heard before the command exits
    return 0


async def _answer(
    assistant: Assistant,
    fixer: TerminalFixer,
    prompt: str,
    thread: ThreadRef,
    stats: TurnStats,
    *,
    plan: bool = False,
    fix: bool | None = None,
    starting: bool = True,
) -> TurnResult | None:
    """One turn through the assistant, its answer streamed to stdout (as it is into a pipe, with control characters
    shown on a terminal), the fix's lines and a cut prompt or a held message on stderr.

    Returns how the turn ended; ``stats`` notes where its time went.
    """
    from cortana.agent.events import ModelCallFinished, RunEvent, TextDelta
    from cortana.streams import closing
    from cortana.turn.events import ImagesAttached, PromptCut, TurnFinished, TurnHeld

    console = fixer.console
    last = "\n"
    shown = printable if sys.stdout.isatty() else str
    result: TurnResult | None = None
    turn = assistant.turn(prompt, thread=thread, plan=plan, fix=fix, starting=starting, attach=True)
    async with closing(turn) as events:
        async for event in events:
            if fixer.render(event):
                continue
            if isinstance(event, PromptCut):
                console.print(event.note, style="yellow", markup=False, highlight=False, soft_wrap=True)
            elif isinstance(event, ImagesAttached):
                console.print(Text(printable(event.note), style="dim"), soft_wrap=True)
            elif isinstance(event, TurnHeld):
                console.print(Text(printable(event.message), style="yellow"))
            elif isinstance(event, TurnFinished):
                result = event.result
            elif isinstance(event, RunEvent):
                stats.handle(event)
            if isinstance(event, TextDelta) and event.text:
                sys.stdout.write(shown(event.text))
                sys.stdout.flush()
                last = event.text[-1]
            elif isinstance(event, ModelCallFinished) and last != "\n":
                sys.stdout.write("\n")  # end the answer's line before tool rows and the summary
                sys.stdout.flush()
                last = "\n"
    return result

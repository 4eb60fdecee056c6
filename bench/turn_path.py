"""How many steps a typed line takes through Cortana's code before it reaches the model (issue 62).

A line is typed into the interactive session (``Repl._handle``) and followed to the engine's ``stream``; a scripted
engine stands in for the model (what is measured is Cortana's path, not the engine's). Three measures:

- **reader** (the issue's): someone reading the way from the typed line to the model call reads each function on
  the chain (the frames from the line's arrival, across the task the turn runs in, down to the engine), top to
  bottom, going into every call of Cortana's code it makes on the way and back out of it, then down the chain.
  Generated and protocol methods are not followed (a dataclass's ``__init__``, a descriptor's ``__get__``,
  ``async with``/``async for`` entries). A step is a move from one module to another; a step back is one into a
  module the walk had already left. ``read`` lists what was read.
- **chain**: the moves between modules along the frames at the model call alone.
- **parts**: every module the path entered, at the grain of Cortana's parts (``cortana.cli``, ``cortana.agent``...),
  and every call into Cortana's code until the model call (``calls``).

Run it on two checkouts:

    python bench/turn_path.py                      # this checkout
    PYTHONPATH=/tmp/before/src python bench/turn_path.py
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import sys
import tempfile
from pathlib import Path
from types import FrameType


async def main() -> dict[str, object]:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from cortana import Assistant, Settings
    from cortana.cli.repl import Repl
    from cortana.testing import ScriptedModel

    quiet = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})
    folder = Path(tempfile.mkdtemp())
    model = ScriptedModel(["Hello."])
    chain: list[str] = []
    entered: list[str] = []  # every module the path entered, in order
    calls = 0
    done = False
    met: list[tuple[FrameType | None, FrameType]] = []  # (caller, frame) of each call into Cortana, in order
    seen: set[int] = set()
    links: list[FrameType] = []  # the frames from the line's arrival down to the model call

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal done, calls
        if done or event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("cortana") and id(frame) not in seen:  # a generator's resumption is no new call
            seen.add(id(frame))
            met.append((frame.f_back, frame))
        if frame.f_code.co_name == "_one_turn" and module == "cortana.cli.repl":
            links.extend(_frames(frame))  # the chain above the task the turn runs in (from the line's arrival)
        if frame.f_code.co_name == "stream" and module == "cortana.testing":
            done = True
            links.extend(_frames(frame))
            up = frame.f_back
            while up is not None:
                name = up.f_globals.get("__name__", "")
                if name.startswith("cortana"):
                    chain.append(f"{name}:{up.f_code.co_name}")
                up = up.f_back
            chain.reverse()
            return
        if module.startswith("cortana"):
            calls += 1
            if not entered or entered[-1] != module:
                entered.append(module)

    assistant = Assistant(folder, quiet, client=model, heartbeat=False)
    with create_pipe_input(), create_app_session(output=DummyOutput()):
        loading = asyncio.ensure_future(assistant.agent())
        repl = Repl(assistant, Console(file=io.StringIO()), loading=loading)
        repl.out = Console(file=io.StringIO())
        repl._agent = await loading  # the engine is up: the path of a line, not of the start
        sys.setprofile(profile)
        try:
            await repl._handle("hello")
        finally:
            sys.setprofile(None)
    await assistant.aclose()
    reader, reader_back, read = _reader(links, met)
    steps, back = _steps([entry.split(":")[0] for entry in chain])
    parts = [".".join(module.split(".")[:2]) for module in entered]
    part_steps, part_back = _steps(parts)
    return {
        "reader_steps": reader,
        "reader_steps_back": reader_back,
        "read": read,
        "chain_steps": steps,
        "chain_steps_back": back,
        "part_steps": part_steps,
        "part_steps_back": part_back,
        "calls": calls,
        "chain": chain,
        "parts": [part for index, part in enumerate(parts) if index == 0 or parts[index - 1] != part],
        "reached_the_model": done,
    }


GENERATED = ("__create_fn__", "__get__", "__set__", "__bool__", "__aiter__", "__aenter__", "__init__")
"""Calls a reader does not follow: generated and protocol methods (a dataclass's ``__init__``, a descriptor's
``__get__``, ``async with``/``async for`` entries)."""


def _frames(frame: FrameType | None) -> list[FrameType]:
    """``frame`` and its callers in Cortana's code, outermost first."""
    found = []
    while frame is not None:
        if _module(frame).startswith("cortana"):
            found.append(frame)
        frame = frame.f_back
    return found[::-1]


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _reader(links: list[FrameType], met: list[tuple[FrameType | None, FrameType]]) -> tuple[int, int, list[str]]:
    """The walk of someone reading the way from the typed line to the model call: each function on the chain, top
    to bottom, into every call of Cortana's code it makes on the way and back out of it, then down the chain. A step
    is a move from one module to another; a step back is one into a module the walk had already left."""
    chain = {(_module(link), link.f_code.co_qualname) for link in links}
    walk: list[str] = []
    read: list[str] = []
    for link in links:
        here = _module(link)
        walk.append(here)
        read.append(f"{here}:{link.f_code.co_qualname}")
        for caller, frame in met:
            name = frame.f_code.co_qualname
            if caller is not link or (_module(frame), name) in chain or name.endswith(GENERATED) or "<" in name:
                continue
            read.append(f"  {_module(frame)}:{name}")
            walk += [_module(frame), here]
    steps, back = _steps(walk)
    return steps, back, read


def _steps(modules: list[str]) -> tuple[int, int]:
    """Moves from one module to another along ``modules``, and how many of them go back into one already left."""
    path = [module for index, module in enumerate(modules) if index == 0 or modules[index - 1] != module]
    left: set[str] = set()
    back = 0
    for before, after in itertools.pairwise(path):
        if after in left:
            back += 1
        left.add(before)
    return len(path) - 1, back


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))

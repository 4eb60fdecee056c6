"""How many steps a typed line takes through Cortana's code before it reaches the model (issue 62).

A line is typed into the interactive session (``Repl._handle``); when the engine's ``stream`` is called, the chain
of calls that led there (the frames, from the session's turn down to the engine's adapter) is read: each move from
one module to another along the chain is a step, and a step into a module the chain had already left is a step
back. Every call made on the way is counted too (``calls``: each entry into Cortana's code until then). A scripted
engine stands in for the model (what is measured is Cortana's path, not the engine's). Run it on two checkouts:

    python bench/turn_path.py                      # this checkout
    PYTHONPATH=/tmp/before/src python bench/turn_path.py

Prints, for the chain (the frames at the model call) and for the whole path at the grain of Cortana's parts
(``cortana.cli``, ``cortana.agent``...: every part the path entered, in order), the steps and the steps back.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import sys
import tempfile
from pathlib import Path


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

    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal done, calls
        if done or event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if frame.f_code.co_name == "stream" and module == "cortana.testing":
            done = True
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
        repl = Repl(assistant, Console(file=io.StringIO()), loading=asyncio.ensure_future(assistant.agent()))
        repl.out = Console(file=io.StringIO())
        await repl._loading  # the engine is up: the path of a line, not of the start
        repl._agent = repl._loading.result()
        sys.setprofile(profile)
        try:
            await repl._handle("hello")
        finally:
            sys.setprofile(None)
    await assistant.aclose()
    steps, back = _steps([entry.split(":")[0] for entry in chain])
    parts = [".".join(module.split(".")[:2]) for module in entered]
    part_steps, part_back = _steps(parts)
    return {
        "chain_steps": steps,
        "chain_steps_back": back,
        "part_steps": part_steps,
        "part_steps_back": part_back,
        "calls": calls,
        "chain": chain,
        "parts": [part for index, part in enumerate(parts) if index == 0 or parts[index - 1] != part],
        "reached_the_model": done,
    }


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

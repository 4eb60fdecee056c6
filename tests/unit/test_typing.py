"""What a type checker knows of a run's output: mypy (strict) on the README's example and the typed API.

``Agent`` is generic in its output type and infers it from ``output_type``; ``RunResult``, ``StreamedRun`` and
``stream_output`` carry it. Checked the way users check their code: mypy on a file that imports cortana.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECKS = """

reveal_type(city)
reveal_type(Agent(model).run_sync("hi").output)
reveal_type(Agent(model, output_type=list[City]))
reveal_type(Agent(model, output_type=City | None))


async def streamed() -> None:
    stream = Agent(model, output_type=City).run_stream("?")
    async for value in stream.stream_output():
        reveal_type(value)
    reveal_type(stream.result)
    reveal_type((await Agent(model).run_stream("?").get_result()).output)
"""


def _readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    return str(next(block for block in blocks if "output_type=City" in block))


def test_mypy_infers_the_output_type_of_the_readmes_typed_example(tmp_path: Path) -> None:
    example = tmp_path / "example.py"
    example.write_text(_readme_example() + CHECKS)
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"),
         str(example)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    lines = checked.stdout.splitlines()
    errors = [line for line in lines if ": error:" in line]
    assert not errors, "the README's example type-checks under --strict:\n" + "\n".join(errors)
    revealed = [line.split("Revealed type is ", 1)[1].strip('"') for line in lines if "Revealed type is" in line]
    assert revealed == [
        "example.City",
        "str",
        "cortana.agent.agent.Agent[list[example.City]]",
        "cortana.agent.agent.Agent[Any]",  # a union is no class: the value is checked at run time, not statically
        "example.City",
        "cortana.messages.RunResult[example.City]",
        "str",
    ], checked.stdout


def test_the_typed_signatures_take_every_keyword_agent_takes() -> None:
    """``Agent``'s typed overloads list its keywords once more (``_AgentOptions``): a keyword missing there would
    make a type checker refuse a call that runs."""
    import inspect
    import typing

    from cortana.agent.agent import Agent, _AgentOptions
    from cortana.agent.run_config import OPTION_NAMES

    explicit = set(inspect.signature(Agent.__init__).parameters) - {"self", "model", "options"}
    keywords = (explicit | OPTION_NAMES) - {"output_type"}  # the config's fields come as keywords (**options)
    assert set(typing.get_type_hints(_AgentOptions)) == keywords

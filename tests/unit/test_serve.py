"""``cortana serve``'s HTTP API, driven by the official ``openai`` package over a real loopback socket.

The engine is scripted (this tests the server and the loop's logic; tests/integration/test_serve_engine.py
runs the real model); uvicorn, Starlette, the queue and the client are the real ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from cortana import Assistant, Settings
from cortana.errors import StreamInterrupted
from cortana.models.base import ModelRequest
from cortana.serve import ChatService, RunQueue, create_app, refuse_over_api
from cortana.serve.http import serving
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response

KEY = "test-key-0123456789abcdef"
QUIET = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})


@dataclass
class Served:
    url: str
    service: ChatService
    workspace: Path
    model: ScriptedModel

    def client(self, key: str = KEY, **options: Any) -> openai.AsyncOpenAI:
        options.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=key, **options)

    def stored(self) -> list[tuple[str, str, str]]:
        """(thread, role, content) of every stored message, in order."""
        with sqlite3.connect(self.workspace / ".cortana" / "memory.db") as db:
            rows = db.execute("SELECT thread_id, body FROM messages ORDER BY id").fetchall()
        out = []
        for thread, body in rows:
            message = json.loads(body)
            out.append((thread, message["role"], message.get("content") or ""))
        return out


@contextlib.asynccontextmanager
async def serve(
    workspace: Path,
    model: ScriptedModel,
    *,
    settings: Settings = QUIET,
    queue: RunQueue | None = None,
    max_body: int | None = None,
    cors: tuple[str, ...] = (),
    heartbeat: bool = False,
    hosts: tuple[str, ...] | None = None,
) -> AsyncIterator[Served]:
    """The assistant of ``workspace`` on ``model``, served on a free loopback port until the block ends."""
    assistant = Assistant(
        workspace, settings, client=model, approve=refuse_over_api, heartbeat=heartbeat, client_label="serve"
    )
    service = ChatService(assistant, queue=queue)
    try:
        app = create_app(service, key=KEY, max_body=max_body, cors_origins=cors, hosts=hosts)
        async with serving(app) as url:
            yield Served(url, service, workspace, model)
    finally:
        service.close()
        await assistant.aclose()


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until ``condition()`` holds; fail past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for _ in itertools.count():
        if condition():
            return
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


async def test_a_whole_answer_has_openais_shape_with_usage(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello there.", "Hello again."])
    async with serve(tmp_path, model) as served, served.client() as client:
        answer = await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Hello there."
        assert answer.choices[0].finish_reason == "stop"
        assert answer.usage is not None and answer.usage.total_tokens > 0
        assert answer.object == "chat.completion" and answer.model == "cortana"
        stream = await client.chat.completions.create(
            model="cortana",
            messages=[{"role": "user", "content": "again"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
        models = await client.models.list()
        assert [m.id for m in models.data] == ["cortana"]
        assert (await client.models.retrieve("cortana")).id == "cortana"


async def test_a_streamed_answer_that_used_a_tool_is_remembered_over_three_requests(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("The code word is marmalade.\n")
    model = ScriptedModel(
        [
            tool_call_response(tool_call("read_file", path="notes.txt")),
            "The code word is marmalade.",
            "You asked for the code word.",
            "Three messages so far.",
        ]
    )
    async with serve(tmp_path, model) as served, served.client() as client:
        history: list[dict[str, str]] = [{"role": "user", "content": "What is the code word in notes.txt?"}]
        response = await client.chat.completions.with_raw_response.create(
            model="cortana", messages=history, stream=True
        )
        stream = response.parse()
        text, activity = "", []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            extra = (chunk.model_extra or {}).get("cortana")
            if extra:
                activity.append(extra)
        assert text == "The code word is marmalade."
        kinds = [(item["type"], item.get("name")) for item in activity]
        assert kinds[:2] == [("tool_call", "read_file"), ("tool_result", "read_file")]
        assert activity[1]["ok"] is True and "marmalade" in activity[1]["summary"]
        assert activity[-1]["type"] == "end"
        thread = activity[-1]["thread"]
        assert response.headers["x-cortana-thread"] == thread, "the thread is known from the first byte"

        for prompt in ("What did I ask?", "How many messages?"):
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": prompt}]
            answer = await client.chat.completions.create(model="cortana", messages=history)
            text = answer.choices[0].message.content or ""
            assert (answer.model_extra or {})["cortana"]["thread"] == thread, "the same history continues its thread"
        last = model.requests[-1].messages
        users = [m.content for m in last if m.role == "user"]
        assert users[0].endswith("What is the code word in notes.txt?") and users[-1].endswith("How many messages?")
        assert any(m.role == "tool" and "marmalade" in m.content for m in last), "the tool result is in memory too"
    stored = served.stored()
    assert {row[0] for row in stored} == {thread}
    assert [row[1] for row in stored].count("user") == 3, "each message stored once, never the history again"


async def test_a_regenerated_answer_branches_into_a_new_thread_seeded_once(tmp_path: Path) -> None:
    model = ScriptedModel(["First.", "Second.", "Again."])
    async with serve(tmp_path, model) as served, served.client() as client:
        one = [{"role": "user", "content": "one"}]
        first = await client.chat.completions.create(model="cortana", messages=one)
        two = [*one, {"role": "assistant", "content": "First."}, {"role": "user", "content": "two"}]
        second = await client.chat.completions.create(model="cortana", messages=two)
        again = await client.chat.completions.create(model="cortana", messages=two)  # regenerate "two"
    threads = [(a.model_extra or {})["cortana"]["thread"] for a in (first, second, again)]
    assert threads[0] == threads[1] != threads[2]
    branch = [row for row in served.stored() if row[0] == threads[2]]
    assert [(role, text) for _, role, text in branch][:2] == [("user", "one"), ("assistant", "First.")], "seeded once"
    assert branch[2][1] == "user" and branch[2][2].endswith("two") and len(branch) == 4


async def test_a_thread_named_by_header_or_user_field_is_continued(tmp_path: Path) -> None:
    model = ScriptedModel(["Noted.", "Still here.", "Yes."])
    async with serve(tmp_path, model) as served, served.client() as client:
        await client.chat.completions.create(
            model="cortana",
            messages=[{"role": "user", "content": "remember 7"}],
            extra_headers={"X-Cortana-Thread": "work"},
        )
        await client.chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "still?"}], user="work"
        )
        with pytest.raises(openai.BadRequestError, match="thread name"):
            await client.chat.completions.create(
                model="cortana", messages=[{"role": "user", "content": "x"}], user="no spaces allowed"
            )
    assert next(m.content for m in model.requests[1].messages if m.role == "user").endswith("remember 7")
    assert {row[0] for row in served.stored()} == {"work"}


async def test_an_approval_nobody_can_give_is_refused_the_model_told_and_the_answer_says_so(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool_call_response(tool_call("write_file", path="out.txt", content="x")), "I could not write the file."]
    )
    async with serve(tmp_path, model) as served, served.client() as client:
        answer = await client.chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "write out.txt"}]
        )
    content = answer.choices[0].message.content or ""
    assert content.startswith("I could not write the file.")
    assert "Not done: write_file needed an approval" in content and "permissions" in content
    assert not (tmp_path / "out.txt").exists()
    told = [m.content for m in model.requests[1].messages if m.role == "tool"]
    assert "nobody can give approval over the API" in told[0]
    tools = (answer.model_extra or {})["cortana"]["tools"]
    assert tools[1] == {**tools[1], "type": "tool_result", "name": "write_file", "ok": False, "refused": True}


async def test_the_users_own_config_lets_a_tool_run_when_served(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call_response(tool_call("write_file", path="out.txt", content="x")), "Written."])
    settings = QUIET.model_copy(update={"permissions": QUIET.permissions.model_copy(update={"allow": ["write_file"]})})
    async with serve(tmp_path, model, settings=settings) as served, served.client() as client:
        answer = await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "w"}])
    assert answer.choices[0].message.content == "Written."
    assert (tmp_path / "out.txt").read_text() == "x"


async def test_bad_requests_get_openai_errors_that_name_the_cause(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with serve(tmp_path, model, max_body=4096) as served, served.client() as client:
        with pytest.raises(openai.AuthenticationError, match="Bearer"):
            async with served.client(key="wrong-key-0123456789") as stranger:
                await stranger.models.list()
        with pytest.raises(openai.APIStatusError, match="over this server's limit") as too_big:
            await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "x" * 5000}])
        assert too_big.value.status_code == 413
        with pytest.raises(openai.NotFoundError, match="'gpt-4o' is not served here"):
            await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.BadRequestError, match="tools run on the server") as tools:
            await client.chat.completions.create(
                model="cortana",
                messages=[{"role": "user", "content": "x"}],
                tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            )
        assert tools.value.body["param"] == "tools"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
            await client.chat.completions.create(model="cortana", messages=[{"role": "assistant", "content": "x"}])
        with pytest.raises(openai.BadRequestError, match="temperature must be"):
            await client.chat.completions.create(
                model="cortana", messages=[{"role": "user", "content": "x"}], temperature=7
            )
        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}) as raw:
            bad = await raw.post("/v1/chat/completions", content=b"{not json")
            assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
            missing = await raw.get("/v1/nothing")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
            assert (await raw.get("/health")).json()["status"] == "ok"
    assert model.requests == [], "nothing reached the engine"


async def test_a_body_nested_too_deep_or_not_unicode_is_a_400_and_the_next_request_is_answered(
    tmp_path: Path,
) -> None:
    """Reproduces the report: a 400,000-deep JSON body and a lone surrogate (\\ud800) were answered with a 500 and a
    traceback. Memory (and the turn's extensions) keep working: the next request is answered and stored."""
    model = ScriptedModel(["Still here."])
    deep = b'{"model": "cortana", "messages": ' + b"[" * 400_000 + b"]" * 400_000 + b"}"
    lone = b'{"model": "cortana", "messages": [{"role": "user", "content": "hi \\ud800 there"}]}'
    async with serve(tmp_path, model, settings=QUIET) as served, served.client() as client:
        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}) as raw:
            nested = await raw.post("/v1/chat/completions", content=deep)
            assert nested.status_code == 400 and "nested too deeply" in nested.json()["error"]["message"]
            surrogate = await raw.post("/v1/chat/completions", content=lone)
            assert surrogate.status_code == 400 and "not Unicode" in surrogate.json()["error"]["message"]
        answer = await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "ok?"}])
        assert answer.choices[0].message.content == "Still here."
        assert [role for _, role, _ in served.stored()] == ["user", "assistant"]


async def test_a_loopback_server_refuses_a_request_addressed_to_another_name(tmp_path: Path) -> None:
    """DNS rebinding: a web page whose name now points at 127.0.0.1 sends its own name as Host."""
    from cortana.cli.serve import LOOPBACK_NAMES

    async with serve(tmp_path, ScriptedModel(["hi"]), hosts=LOOPBACK_NAMES) as served:
        port = served.url.rsplit(":", 1)[1]
        headers = {"Authorization": f"Bearer {KEY}"}
        async with httpx.AsyncClient(base_url=served.url, headers=headers) as raw:
            rebound = await raw.get("/v1/models", headers={"Host": f"evil.example:{port}"})
            assert rebound.status_code == 421 and "loopback" in rebound.json()["error"]["message"]
            assert (await raw.get("/health", headers={"Host": "evil.example"})).status_code == 421
            for name in ("127.0.0.1", "localhost", "[::1]"):
                assert (await raw.get("/v1/models", headers={"Host": f"{name}:{port}"})).status_code == 200, name
        async with served.client() as client:
            assert [m.id for m in (await client.models.list()).data] == ["cortana"]


async def test_past_the_queue_bound_a_429_with_retry_after(tmp_path: Path) -> None:
    model = ScriptedModel([ScriptedResponse("slow one", delay=1.0), "second"])
    async with serve(tmp_path, model, queue=RunQueue(slots=1, max_waiting=1)) as served, served.client() as client:
        first = asyncio.ensure_future(
            client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "a"}])
        )
        await until(lambda: served.service.queue.running > 0)
        second = asyncio.ensure_future(
            client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "b"}])
        )
        await until(lambda: served.service.queue.waiting > 0)
        with pytest.raises(openai.RateLimitError, match="busy") as busy:
            await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "c"}])
        assert int(busy.value.response.headers["retry-after"]) >= 1
        assert [(await first).choices[0].message.content, (await second).choices[0].message.content] == [
            "slow one",
            "second",
        ]


async def test_a_client_that_disconnects_mid_stream_stops_its_run(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def endless(request: ModelRequest) -> ScriptedResponse:
        started.set()
        return ScriptedResponse("word " * 10, delay=60)

    model = ScriptedModel([endless, "next answer"])
    async with serve(tmp_path, model) as served:
        async with (
            httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}) as raw,
            raw.stream(
                "POST", "/v1/chat/completions", json={"messages": [{"role": "user", "content": "go"}], "stream": True}
            ) as response,
        ):
            assert response.status_code == 200
            await asyncio.wait_for(started.wait(), 10)
        await until(lambda: served.service.queue.running == 0)  # the run stopped when its client left
        async with served.client() as client:  # the engine is free for the next client at once
            answer = await client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "x"}])
        assert answer.choices[0].message.content == "next answer"
    assert ("go" in served.stored()[0][2]), "the user's message of the stopped run is kept"  # fmt: skip


async def test_an_engine_that_dies_mid_stream_is_an_error_event_and_the_message_is_kept(tmp_path: Path) -> None:
    model = ScriptedModel(
        [ScriptedResponse("Half an ans", error=StreamInterrupted("the engine closed the connection mid-answer"))]
    )
    async with serve(tmp_path, model) as served, served.client() as client:
        stream = await client.chat.completions.create(
            model="cortana", messages=[{"role": "user", "content": "tell me"}], stream=True
        )
        with pytest.raises(openai.APIError, match="closed the connection mid-answer"):
            async for _ in stream:
                pass
    assert served.stored()[0][1] == "user" and served.stored()[0][2].endswith("tell me")


async def test_a_slow_reader_holds_no_engine_slot(tmp_path: Path) -> None:
    big = "xxxxxxxx " * 30_000  # 30,000 chunks, megabytes of events: the server's writes to this client block

    model = ScriptedModel([big, "quick"])
    async with serve(tmp_path, model) as served:
        sock = socket.create_connection(("127.0.0.1", int(served.url.rsplit(":", 1)[1])))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps({"messages": [{"role": "user", "content": "big"}], "stream": True}).encode()
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )  # and never read
        await until(lambda: len(model.requests) > 0)
        async with served.client() as client:
            answer = await asyncio.wait_for(
                client.chat.completions.create(model="cortana", messages=[{"role": "user", "content": "q"}]), 10
            )
        assert answer.choices[0].message.content == "quick"
        sock.close()


async def test_check_ins_reach_an_events_client_and_resume_after_the_last_seen(tmp_path: Path) -> None:
    model = ScriptedModel([])
    async with (
        serve(tmp_path, model) as served,
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as raw,
    ):
        served.service.publish("Standup starts in ten minutes.")

        async def read(headers: dict[str, str]) -> list[dict[str, Any]]:
            events: list[dict[str, Any]] = []
            async with raw.stream("GET", "/v1/cortana/events", headers=headers) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                event: dict[str, Any] = {}
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        event["id"] = line[4:]
                    elif line.startswith("data: "):
                        event.update(json.loads(line[6:]))
                        events.append(event)
                        event = {}
                        if len(events) == 2:
                            return events
                        served.service.publish("And lunch at noon.")
            return events

        events = await read({})
        assert [e["text"] for e in events] == ["Standup starts in ten minutes.", "And lunch at noon."]
        assert events[0]["type"] == "check_in"
        served.service.publish("Third.")
        resumed = await asyncio.wait_for(_first(raw, {"Last-Event-ID": events[1]["id"]}), 10)
        assert resumed["text"] == "Third."


async def test_the_heartbeats_check_ins_reach_an_events_client(tmp_path: Path) -> None:
    (tmp_path / "personality").mkdir()
    (tmp_path / "personality" / "HEARTBEAT.md").write_text("- Remind the user to stretch.\n")
    beats = {"interval_minutes": 0.01, "active_hours": None, "idle_checkin_hours": None, "reflect_hours": None}
    settings = QUIET.model_copy(update={"heartbeat": QUIET.heartbeat.model_copy(update=beats)})
    model = ScriptedModel(["Time to stretch."])
    async with (
        serve(tmp_path, model, settings=settings, heartbeat=True) as served,
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as raw,
    ):
        assert await served.service.start_heartbeat()
        check_in = await asyncio.wait_for(_first(raw, {}), 10)
    assert check_in["text"] == "Time to stretch." and check_in["type"] == "check_in"
    assert "stretch" in model.requests[0].messages[-1].content, "the checklist was the check-in's prompt"


async def _first(raw: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    async with raw.stream("GET", "/v1/cortana/events", headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                return dict(json.loads(line[6:]))
    raise AssertionError("no event")


async def test_no_cors_unless_configured(tmp_path: Path) -> None:
    preflight = {"Origin": "https://chat.example", "Access-Control-Request-Method": "POST"}
    for cors, allowed in (((), False), (("https://chat.example",), True)):
        async with serve(tmp_path, ScriptedModel([]), cors=cors) as served, httpx.AsyncClient() as raw:
            answer = await raw.options(f"{served.url}/v1/chat/completions", headers=preflight)
            assert ("access-control-allow-origin" in answer.headers) is allowed
            unauthorized = await raw.get(f"{served.url}/v1/models", headers={"Origin": "https://chat.example"})
            assert unauthorized.status_code == 401, "CORS never stands in for the key"


def test_a_thread_name_and_client_history_are_checked(tmp_path: Path) -> None:
    from cortana.serve import BadRequest, parse_messages

    parsed = parse_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "c"},
            {"role": "user", "content": "d"},
        ],
        max_messages=10,
    )
    assert (parsed.prompt, parsed.dialogue, parsed.instructions) == (
        "d",
        (("user", "a\nb"), ("assistant", "c")),
        "Be brief.",
    )
    cases: list[tuple[Any, str]] = [
        ([], "non-empty list"),
        ([{"role": "tool", "content": "x"}], "client's own tools"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "only text parts"),
        ([{"role": "user", "content": "x"}] * 11, "more than this server takes"),
        ([{"role": "wizard", "content": "x"}], "role must be"),
        ([{"role": "user", "content": "  "}], "is empty"),
    ]
    for messages, cause in cases:
        with pytest.raises(BadRequest, match=cause):
            parse_messages(messages, max_messages=10)

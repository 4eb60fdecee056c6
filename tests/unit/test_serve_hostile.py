"""``cortana serve`` answers hostile headers and bodies with protocol errors (a 4xx in OpenAI's error shape), never
a 500 with a traceback in its log; driven over a real loopback socket as tests/unit/test_serve.py does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cortana.serve.http import Guard
from cortana.testing import ScriptedModel
from tests.unit.test_serve import KEY, _first, serve

AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """What the server logs, uvicorn's error log included (it does not pass its records on to the root)."""
    uvicorn_errors = logging.getLogger("uvicorn.error")
    uvicorn_errors.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        uvicorn_errors.removeHandler(caplog.handler)


def errors_in(log: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in log.records if record.levelno >= logging.ERROR or record.exc_info]


async def test_a_last_event_id_that_is_no_event_id_is_a_400_naming_the_header(
    tmp_path: Path, server_log: pytest.LogCaptureFixture
) -> None:
    """Reproduces the report: a ``Last-Event-ID`` of 5,000 digits was answered with a 500 and a traceback (Python's
    int() refuses more than 4,300 digits), and so was ``²``, a digit to str.isdigit() that int() refuses."""
    async with (
        serve(tmp_path, ScriptedModel([])) as served,
        httpx.AsyncClient(base_url=served.url, headers=AUTH, timeout=10) as raw,
    ):
        for value in (b"1" * 5000, "\u00b2".encode("latin-1"), b"12abc", b"-3", b"1" * 19):
            answer = await raw.get("/v1/cortana/events", headers={b"Last-Event-ID": value})
            assert answer.status_code == 400, value[:20]
            error = answer.json()["error"]
            assert error["param"] == "Last-Event-ID" and error["type"] == "invalid_request_error"
            assert "Last-Event-ID" in error["message"] and "whole number" in error["message"]
            assert len(error["message"]) < 400, "the value is shown cut short"
        served.service.publish("Still listening.")
        resumed = await asyncio.wait_for(_first(raw, {"Last-Event-ID": "0"}), 10)
        assert resumed["text"] == "Still listening."
    assert errors_in(server_log) == []


async def test_a_number_of_thousands_of_digits_in_the_body_is_a_400(
    tmp_path: Path, server_log: pytest.LogCaptureFixture
) -> None:
    """json.loads raises a plain ValueError (not a JSONDecodeError) for an integer past 4,300 digits: it was a 500."""
    model = ScriptedModel(["Fine."])
    long_seed = b'{"model": "cortana", "messages": [{"role": "user", "content": "hi"}], "seed": ' + b"7" * 5000 + b"}"
    async with serve(tmp_path, model) as served, httpx.AsyncClient(base_url=served.url, headers=AUTH) as raw:
        answer = await raw.post("/v1/chat/completions", content=long_seed)
        assert answer.status_code == 400
        assert "5,000 digits" in answer.json()["error"]["message"]
        for seed in (2**63, -1):  # a number Python reads, but no engine takes
            body = {"messages": [{"role": "user", "content": "hi"}], "seed": seed}
            refused = await raw.post("/v1/chat/completions", json=body)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == "seed", seed
        fine = await raw.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert fine.status_code == 200 and fine.json()["choices"][0]["message"]["content"] == "Fine."
    assert errors_in(server_log) == []


async def test_a_content_length_of_thousands_of_digits_is_over_the_limit_not_an_error() -> None:
    """uvicorn's HTTP parser refuses such a request before the API sees it; behind another server the guard must
    not raise on it either."""
    reached: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope)

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    guard = Guard(app, key=KEY, max_body=4096)
    for length in (b"1" * 5000, "\u00b2".encode("latin-1"), b"4096"):
        sent.clear()
        headers = [(b"authorization", f"Bearer {KEY}".encode()), (b"content-length", length)]
        scope = {"type": "http", "path": "/v1/chat/completions", "method": "POST", "headers": headers}
        await guard(scope, receive, send)
        if length == b"1" * 5000:
            assert sent[0]["status"] == 413
    assert len(reached) == 2, "an unreadable length and one within the limit go on, for the body's own check"

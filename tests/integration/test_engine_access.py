"""The embedded engine serves only Cortana: a key on every request, nothing for other web origins, no web UI."""

from __future__ import annotations

import httpx

from cortana import Message
from cortana.models.embedded import EmbeddedClient
from tests.integration.conftest import TEST_MODEL

EVIL = "http://evil.example"


async def test_only_the_holder_of_the_key_can_use_the_embedded_engine(engine_url: str, engine_key: str) -> None:
    async with httpx.AsyncClient(base_url=engine_url) as http:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        assert (await http.post("/v1/chat/completions", json=body)).status_code == 401
        wrong = await http.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
        assert (await http.get("/props")).status_code == 401
        keyed = await http.get("/props", headers={"Authorization": f"Bearer {engine_key}"})
        assert keyed.status_code == 200
        preflight = await http.options(
            "/v1/chat/completions",
            headers={"Origin": EVIL, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "*"},
        )
        assert preflight.headers.get("access-control-allow-origin", "") in ("", "null"), "no web page may call it"
        answered = await http.get("/props", headers={"Origin": EVIL, "Authorization": f"Bearer {engine_key}"})
        assert EVIL not in answered.headers.get("access-control-allow-origin", "")
        assert (await http.get("/")).status_code == 404, "no web UI"


async def test_each_start_makes_its_own_key() -> None:
    first = await EmbeddedClient.start(TEST_MODEL, context_window=512, threads=1)
    try:
        key = first.server.api_key
        assert len(key) >= 32 and await first.count_tokens([Message.user("hi")]) > 0, "the client sends the key"
        async with httpx.AsyncClient(base_url=first.base_url) as http:
            assert (await http.get("/props")).status_code == 401
            assert (await http.get("/props", headers={"Authorization": f"Bearer {key}"})).status_code == 200
    finally:
        await first.aclose()

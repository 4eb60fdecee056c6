"""HTTP plumbing shared by the engine adapters: retries, streaming lines, error mapping.

Imported only by adapters (never by ``import cortana``), so httpx loads on first use.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

import httpx

from cortana.display import valid_text
from cortana.errors import EngineUnavailable, ModelError, StreamInterrupted
from cortana.models.base import ModelClient

__all__ = ["JSON_HEADERS", "HttpClient", "HttpEngine", "json_bytes"]

JSON_HEADERS = {"Content-Type": "application/json"}


def json_bytes(body: Any) -> bytes:
    """A request body as UTF-8 JSON. Text that is not Unicode (a folder name that is not UTF-8 in a path the prompt
    mentions, a lone surrogate a client sent) is replaced, not a crash before anything is sent."""
    return valid_text(json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)).encode("utf-8")


_RETRY_STATUSES = {500, 502, 503, 504}


class HttpEngine:
    """An HTTP connection to one engine, with bounded retries and clear errors.

    Args:
        base_url: the engine's address, e.g. ``http://127.0.0.1:11434``.
        engine: the engine's name in messages ("Ollama", "llama.cpp"...).
        start_hint: how to start this engine, shown when nothing answers.
        timeout: seconds to wait for a response to start (reading a long prompt on CPU is slow).
        max_retries: extra attempts after a 5xx answer, a timeout or a refused connection.
        transport: an httpx transport, for tests.
    """

    def __init__(
        self,
        base_url: str,
        *,
        engine: str,
        start_hint: str,
        timeout: float = 600.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.engine = engine
        self.start_hint = start_hint
        self.max_retries = max_retries
        self.backoff = backoff
        self._timeout = timeout
        self._headers = headers
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The connection pool, made on first use: building an agent stays cheap and sends nothing.

        A plain ``http://`` engine (every local one) gets no TLS setup: loading the
        certificate store costs tens of milliseconds and would never be used.
        """
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                timeout=httpx.Timeout(self._timeout, connect=5.0),
                headers=self._headers,
                transport=self._transport,
                verify=self.base_url.startswith("https:"),
            )
        return self._client

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        on_error: Callable[[int, str], Exception | None] | None = None,
        request_timeout: float | None = None,
    ) -> Any:
        """Send a request and return the decoded JSON answer (retrying what can be retried)."""
        response = await self._send(
            method, path, json_body, stream=False, on_error=on_error, request_timeout=request_timeout
        )
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:
            raise ModelError(f"{self.engine} at {self.base_url}{path} answered with invalid JSON: {exc}") from exc

    async def stream_lines(
        self,
        path: str,
        json_body: Any,
        *,
        on_error: Callable[[int, str], Exception | None] | None = None,
    ) -> AsyncGenerator[str, None]:
        """POST and yield the answer's non-empty lines as they arrive.

        A connection that breaks after the answer started raises
        :class:`StreamInterrupted`; nothing is retried once text was received,
        so a half-answer is never silently repeated or presented as complete.
        """
        response = await self._send("POST", path, json_body, stream=True, on_error=on_error)
        try:
            async for line in response.aiter_lines():
                if line.strip():
                    yield line
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout) as exc:
            raise StreamInterrupted(
                f"{self.engine} at {self.base_url} stopped answering mid-stream ({type(exc).__name__}: {exc}). "
                "The partial answer was discarded; check the engine's log and retry the turn."
            ) from exc
        finally:
            await response.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        json_body: Any,
        *,
        stream: bool,
        on_error: Callable[[int, str], Exception | None] | None,
        request_timeout: float | None = None,
    ) -> httpx.Response:
        attempt = 0
        stale_retried = False
        while True:
            try:
                request = self.client.build_request(
                    method,
                    path,
                    content=None if json_body is None else json_bytes(json_body),
                    headers=None if json_body is None else JSON_HEADERS,
                    timeout=request_timeout if request_timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )
                response = await self.client.send(request, stream=stream)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                # Closed before any answer: most often a kept-alive connection the engine had just
                # dropped (llama.cpp closes idle ones). One immediate retry opens a fresh connection;
                # an engine that really died then fails to connect and says so below.
                if not stale_retried:
                    stale_retried = True
                    continue
                raise EngineUnavailable(
                    f"{self.engine} at {self.base_url} closed the connection without answering {path} "
                    f"({type(exc).__name__}: {exc}). It may have crashed: check its log. {self.start_hint}",
                    url=self.base_url,
                ) from exc
            except (httpx.ConnectError, httpx.TimeoutException) as exc:
                if attempt < self.max_retries:
                    attempt += 1
                    await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
                    continue
                if isinstance(exc, httpx.ConnectError):
                    raise EngineUnavailable(
                        f"{self.engine} is not answering at {self.base_url} ({exc}). {self.start_hint}",
                        url=self.base_url,
                    ) from exc
                raise ModelError(
                    f"{self.engine} at {self.base_url} did not answer {path} in time after {attempt + 1} attempts "
                    f"({type(exc).__name__}). A long prompt on a slow CPU can take minutes: raise the timeout, "
                    "or use a smaller model."
                ) from exc
            if response.status_code < 400:
                return response
            body = (await response.aread()).decode("utf-8", "replace")
            await response.aclose()
            if response.status_code in _RETRY_STATUSES and attempt < self.max_retries:
                attempt += 1
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
                continue
            error = on_error(response.status_code, body) if on_error else None
            if error is not None:
                raise error
            retried = f" after {attempt + 1} attempts" if attempt else ""
            raise ModelError(
                f"{self.engine} at {self.base_url}{path} answered HTTP {response.status_code}{retried}: "
                f"{error_text(body)[:500]}"
            )


def error_text(body: str) -> str:
    """The human part of an error body: ``{"error": {"message": ...}}``, ``{"error": "..."}`` or the raw text."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body.strip()
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return body.strip()


class HttpClient(ModelClient):
    """What the HTTP adapters share: the connection (``http``) and the context window they report.

    Subclasses set ``http`` and ``_context_window`` in their ``__init__``.
    """

    http: HttpEngine
    _context_window: int | None = None

    @property
    def base_url(self) -> str:
        """The engine's address."""
        return self.http.base_url

    @property
    def context_window(self) -> int | None:
        """The window the engine reports (once connected), else the one asked for."""
        return self._context_window

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

"""The OpenAI-compatible HTTP API of ``cortana serve``, on Starlette: routes, the key, limits, the turn's feed.

What the requests and responses look like is ``cortana.serve.openai_chat``'s; this module is the HTTP around it.

``GET /v1/models`` lists the assistant as one model, ``cortana``;
``POST /v1/chat/completions`` answers, streamed (server-sent events ending in
``data: [DONE]``) or not, with token usage; ``GET /v1/cortana/events``
streams the assistant's check-ins. Errors have OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``) and status codes.

Every path but ``/health`` needs the bearer key. A request body over the
limit is refused before it is read (413). A turn runs in a task of its own,
feeding a queue the response drains, so a slow client holds no engine slot
and a vanished one stops its run (docs/serve.md).

Tool activity reaches clients in a field plain clients ignore: a chunk whose
``choices`` delta is empty carries ``"cortana": {"type": "tool_call", ...}``
or ``{"type": "tool_result", ...}``; a whole answer lists them under
``cortana.tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from cortana.errors import ContextOverflow, CortanaError, ModelError
from cortana.serve.keys import keys_match
from cortana.serve.openai_chat import Chunks, completion, error_body, read_request
from cortana.serve.service import BadRequest, Busy, ChatService, Piece, ToolActivity, TurnEnd, TurnStream

__all__ = ["MODEL_NAME", "create_app", "serving"]

log = logging.getLogger(__name__)

MODEL_NAME = "cortana"
"""The model the assistant is served as."""

KEEPALIVE_SECONDS = 15.0
"""A comment line goes to an idle event stream this often, so proxies keep it open."""
MAX_NUMBER_DIGITS = 18
"""The most digits a number in a header is read with (an int64's worth): the check-ins' ids count up from 1, and
a body's length past it is past any limit; read whole, a number of 5,000 digits raised (Python's int() refuses
more than 4,300) and the client was answered with a 500 and a traceback in the log."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_response(
    status: int, message: str, kind: str, *, param: str | None = None, code: str | None = None, **headers: str
) -> JSONResponse:
    """An error in OpenAI's shape with ``status``."""
    return JSONResponse(error_body(message, kind, param=param, code=code), status_code=status, headers=headers or None)


class Guard:
    """ASGI middleware in front of the API: the Host header, the bearer key, then the body size (by
    ``Content-Length``).

    Args:
        app: the application behind it.
        key: the key clients must send as ``Authorization: Bearer KEY``.
        max_body: the largest request body in bytes (a body that grows past it while read is refused too).
        open_paths: paths that need no key (a health check).
        hosts: the host names requests must be addressed to (a loopback server's: a browser page whose name was
            pointed at this machine sends its own name, DNS rebinding); None: any.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        key: str,
        max_body: int,
        open_paths: Sequence[str] = ("/health",),
        hosts: Sequence[str] | None = None,
    ) -> None:
        self.app = app
        self.key = key
        self.max_body = max_body
        self.open_paths = frozenset(open_paths)
        self.hosts = None if hosts is None else frozenset(host.lower() for host in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if self.hosts is not None and _host_name(headers.get("host", "")) not in self.hosts:
            response = error_response(
                421,
                f"This server answers requests addressed to {', '.join(sorted(self.hosts))} only, not "
                f"{headers.get('host', '(no Host header)')[:100]!r}: it listens on loopback, for this machine.",
                "invalid_request_error",
                code="misdirected_request",
            )
            await response(scope, receive, send)
            return
        if scope["path"] in self.open_paths or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)  # OPTIONS: a CORS preflight, answered by the CORS layer or 405
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not keys_match(given.strip(), self.key):
            response = error_response(
                401,
                "Incorrect or missing API key. Send the key `cortana serve` printed when it made it (kept in "
                "serve.key beside your cortana.yml) as `Authorization: Bearer KEY`.",
                "invalid_request_error",
                code="invalid_api_key",
            )
            await response(scope, receive, send)
            return
        length = _whole_number(headers.get("content-length", ""))
        if length is not None and length > self.max_body:  # one that is no number: the body's own reading counts
            await too_large(self.max_body)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _whole_number(text: str) -> int | None:
    """``text`` as a whole number in ASCII digits, any past :data:`MAX_NUMBER_DIGITS` as one more than an int64
    holds; None when it is none (``-3``, ``12abc``, ``²``: str.isdigit() says yes to that, and int() no)."""
    text = text.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    return int(text) if len(text) <= MAX_NUMBER_DIGITS else 10**MAX_NUMBER_DIGITS


def _host_name(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:8642`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def too_large(limit: int) -> JSONResponse:
    """413 for a body over ``limit`` bytes."""
    return error_response(
        413,
        f"The request body is over this server's limit of {limit // 1024:,} KiB. The assistant keeps the "
        "conversation, so the newest messages are enough; or raise serve.max_body_kb in cortana.yml.",
        "invalid_request_error",
        code="request_too_large",
    )


class _TooLarge(Exception):
    pass


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, read up to ``limit`` bytes (``_TooLarge`` past it); :class:`BadRequest` if not JSON."""
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise _TooLarge
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"the body is not valid JSON: {error}") from None
    except ValueError as error:  # a number past Python's 4,300 digits (int() refuses it; a plain ValueError)
        digits = re.search(r"has (\d+) digits", str(error))
        size = f"{int(digits[1]):,} digits" if digits else "thousands of digits"
        raise BadRequest(f"the body holds a number of {size}; no field takes one that long") from None
    except RecursionError:
        raise BadRequest("the body's JSON is nested too deeply to read; send messages as a flat list") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        problem = repr(error.object[error.start : error.end])
        raise BadRequest(
            f"the body holds text that is not Unicode ({problem}, a lone UTF-16 surrogate escape): send valid text"
        ) from None
    except RecursionError:
        raise BadRequest("the body's JSON is nested too deeply to read; send messages as a flat list") from None
    return value


class ChatAPI:
    """The routes, over one :class:`ChatService`."""

    def __init__(self, service: ChatService, *, max_body: int, model_name: str = MODEL_NAME) -> None:
        self.service = service
        self.max_body = max_body
        self.model_name = model_name
        self.created = int(time.time())

    def model_card(self) -> dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "cortana"}

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self.model_card()]})

    async def model(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name != self.model_name:
            return self.unknown_model(name)
        return JSONResponse(self.model_card())

    def unknown_model(self, name: object) -> Response:
        return error_response(
            404,
            f"The model {name!r} is not served here; the assistant is the model {self.model_name!r}.",
            "invalid_request_error",
            param="model",
            code="model_not_found",
        )

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {"status": "ok", "waiting": self.service.queue.waiting, "running": self.service.queue.running}
        )

    async def chat_completions(self, request: Request) -> Response:
        try:
            body = await read_json(request, self.max_body)
            chat = read_request(body, self.service, thread_header=request.headers.get("x-cortana-thread"))
            if chat.model is not None and chat.model != self.model_name:
                return self.unknown_model(chat.model)
            stream = self.service.begin(chat.chat, thread_name=chat.thread_name, settings=chat.settings)
        except _TooLarge:
            return too_large(self.max_body)
        except BadRequest as error:
            return error_response(400, str(error), "invalid_request_error", param=error.param)
        except Busy as busy:
            return error_response(
                429, str(busy), "rate_limit_error", code="rate_limit_exceeded", **{"Retry-After": str(busy.retry_after)}
            )
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if chat.stream:
            return StreamingResponse(
                self.sse(stream, Chunks(completion_id, self.model_name), chat.include_usage),
                media_type="text/event-stream",
                headers={
                    "Cache-Control": "no-cache",
                    "X-Accel-Buffering": "no",
                    "X-Cortana-Thread": stream.thread.thread_id,
                },
            )
        return await self.whole(request, stream, completion_id)

    async def whole(self, request: Request, stream: TurnStream, completion_id: str) -> Response:
        """A non-streamed answer; the run stops if the client goes away meanwhile."""
        pieces = Feed(stream)
        gone = asyncio.ensure_future(disconnected(request))
        tools: list[dict[str, Any]] = []
        try:
            while True:
                getting = asyncio.ensure_future(pieces.get())
                await asyncio.wait({getting, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    getting.cancel()
                    raise ClientGone
                piece = getting.result()
                if isinstance(piece, ToolActivity):
                    tools.append(piece.as_json())
                elif isinstance(piece, TurnEnd):
                    answer = completion(piece, completion_id=completion_id, model=self.model_name, tools=tools)
                    return JSONResponse(answer, headers={"X-Cortana-Thread": piece.thread.thread_id})
                elif isinstance(piece, Failure):
                    return piece.response()
        except ClientGone:
            return Response(status_code=499)
        finally:
            gone.cancel()
            await pieces.stop()

    async def sse(self, stream: TurnStream, chunks: Chunks, include_usage: bool) -> AsyncIterator[str]:
        """The answer as chat-completion chunks; a failure after the start is an error event, then the end."""
        pieces = Feed(stream)
        try:
            yield chunks.start()
            while True:
                piece = await pieces.get()
                if isinstance(piece, str):
                    yield chunks.text(piece)
                elif isinstance(piece, ToolActivity):
                    yield chunks.activity(piece)
                elif isinstance(piece, TurnEnd):
                    for event in chunks.end(piece, include_usage=include_usage):
                        yield event
                    break
                else:
                    for event in Chunks.error(piece.body()):
                        yield event
                    break
        finally:
            await pieces.stop()  # the client went away (cancelled here) or the answer is complete

    async def events(self, request: Request) -> Response:
        """The assistant's check-ins as server-sent events (``id:`` numbered; ``Last-Event-ID`` resumes); with
        ``?thread=ID``, only the check-ins that belong to that thread."""
        given = request.headers.get("last-event-id", "").strip()
        after = _whole_number(given) if given else 0
        if after is None or after >= 10**MAX_NUMBER_DIGITS:
            shown = repr(given[:20]) + (f" ({len(given):,} characters)" if len(given) > 20 else "")
            return error_response(
                400,
                f"The Last-Event-ID header must be the id of a check-in this server sent, a whole number such as 42 "
                f"(at most {MAX_NUMBER_DIGITS} digits), not {shown}; leave it out to hear the newest check-ins.",
                "invalid_request_error",
                param="Last-Event-ID",
                code="invalid_last_event_id",
            )
        thread = request.query_params.get("thread") or None

        async def stream() -> AsyncIterator[str]:
            yield ": cortana check-ins\n\n"
            check_ins = self.service.check_ins(after, thread=thread)
            try:
                waiting: asyncio.Future[Any] | None = None
                while True:
                    waiting = waiting or asyncio.ensure_future(anext(check_ins))
                    done, _ = await asyncio.wait({waiting}, timeout=KEEPALIVE_SECONDS)
                    if not done:
                        yield ": keep-alive\n\n"
                        continue
                    check_in = waiting.result()
                    waiting = None
                    data = {
                        "type": "check_in",
                        "text": check_in.text,
                        "thread": check_in.thread,
                        "created": check_in.created,
                    }
                    yield f"id: {check_in.id}\nevent: check_in\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            finally:
                if waiting is not None:
                    waiting.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await waiting
                await check_ins.aclose()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


async def disconnected(request: Request) -> None:
    """Return once the client has gone (the body was read already, so the next message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


@dataclasses.dataclass(frozen=True)
class Failure:
    """A turn that failed: what the client is told."""

    status: int
    message: str
    kind: str
    code: str | None = None

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, code=self.code)

    def response(self) -> Response:
        return error_response(self.status, self.message, self.kind, code=self.code)


class Feed:
    """A turn run by a task of its own into a queue, so that how fast the client reads never holds the engine."""

    def __init__(self, stream: TurnStream) -> None:
        self._queue: asyncio.Queue[Piece | Failure] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._run(stream))

    async def _run(self, stream: TurnStream) -> None:
        try:
            async for piece in stream:
                self._queue.put_nowait(piece)
        except ContextOverflow as error:
            self._queue.put_nowait(Failure(400, str(error), "invalid_request_error", "context_length_exceeded"))
        except ModelError as error:
            self._queue.put_nowait(Failure(502, f"The engine failed: {error}", "server_error", "engine_error"))
        except CortanaError as error:
            self._queue.put_nowait(Failure(500, str(error), "server_error"))
        except Exception as error:
            log.exception("a served turn failed")
            self._queue.put_nowait(Failure(500, f"Cortana failed: {type(error).__name__}: {error}", "server_error"))
        finally:
            await stream.aclose()

    async def get(self) -> Piece | Failure:
        return await self._queue.get()

    async def stop(self) -> None:
        """Stop the run if it still goes (the client left), and wait for it to end."""
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        message = f"No such endpoint: {request.method} {request.url.path}"
        return error_response(404, message, "invalid_request_error", code="not_found")
    if error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        return error_response(405, message, "invalid_request_error", code="method_not_allowed")
    return error_response(error.status_code, str(error.detail), "invalid_request_error")


def create_app(
    service: ChatService,
    *,
    key: str,
    cors_origins: Sequence[str] = (),
    max_body: int | None = None,
    model_name: str = MODEL_NAME,
    hosts: Sequence[str] | None = None,
) -> ASGIApp:
    """The HTTP API over ``service``, as an ASGI application (uvicorn runs it in ``cortana serve``).

    Args:
        service: the assistant and its queue.
        key: the bearer key every request but ``/health`` must carry.
        cors_origins: web origins whose scripts may call the API (none: no CORS headers at all).
        max_body: the largest request body in bytes (default: cortana.yml's ``serve.max_body_kb``).
        model_name: the name the assistant is listed under.
        hosts: the Host names requests must carry (``cortana serve`` on loopback: this machine's names); None: any.
    """
    limit = max_body if max_body is not None else service.assistant.settings.serve.max_body_kb * 1024
    api = ChatAPI(service, max_body=limit, model_name=model_name)
    middleware = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "x-cortana-thread"],
                expose_headers=["x-cortana-thread", "retry-after"],
            )
        )
    app = Starlette(
        routes=[
            Route("/health", api.health),
            Route("/v1/models", api.models),
            Route("/v1/models/{name:path}", api.model),
            Route("/v1/chat/completions", api.chat_completions, methods=["POST"]),
            Route("/v1/cortana/events", api.events),
        ],
        exception_handlers={HTTPException: _http_error},
    )
    guarded: ASGIApp = Guard(app, key=key, max_body=limit, hosts=hosts)
    for layer in reversed(middleware):
        guarded = layer.cls(guarded, *layer.args, **layer.kwargs)  # CORS outside the key check: preflights carry none
    return guarded


@contextlib.asynccontextmanager
async def serving(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn in this event loop until the block ends; yields its address (``http://HOST:PORT``).

    For tests, benchmarks and programs that embed the API next to their own work (``cortana serve`` runs
    uvicorn itself, until a signal). ``port=0`` takes a free port.
    """
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    # Signals stay the embedding program's: uvicorn would take Ctrl-C for itself.
    server.capture_signals = contextlib.nullcontext  # type: ignore[assignment,method-assign]
    running = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if running.done():
                running.result()  # uvicorn failed to start: its error
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        bound = sock.getsockname()
        yield f"http://{f'[{bound[0]}]' if ':' in bound[0] else bound[0]}:{bound[1]}"
    finally:
        server.should_exit = True
        await running
        sock.close()

"""A loopback OpenAI-compatible server that answers instantly from a script, for the framework benchmarks.

It runs in its own process, so its CPU time never counts against the
framework being measured, and it keeps no state, so runs of different
frameworks can interleave freely. What it answers depends only on the
request:

- no tool result in the conversation yet (the tools' results carry
  ``MARKER``): a tool call, or several, by the first path segment:
  ``/one/v1``  one call: ``get_weather(city="Tokyo")``;
  ``/four/v1`` four calls in one response: ``slow_lookup(key="a".."d")``;
- a tool result present: the final answer, as text; or, where the request
  offers a ``final_answer`` tool (smolagents' ToolCallingAgent ends a run
  only through it), as a call to that tool.

Both plain JSON and ``"stream": true`` (server-sent events, with a usage chunk
when ``stream_options.include_usage`` asks) are served, with HTTP/1.1
keep-alive. ``GET /v1/models`` lists one model.

    python bench/scripted_server.py [--port 0]    # prints the port, serves until killed
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MARKER = "w-7c1f"
"""Every benchmark tool's result contains this; its presence in a request means "tools have run"."""

ANSWER = "It is sunny in Tokyo."
KEYS = ("a", "b", "c", "d")


def _calls(mode: str) -> list[dict[str, Any]]:
    if mode == "four":
        return [
            {
                "id": f"call_{key}",
                "type": "function",
                "function": {"name": "slow_lookup", "arguments": f'{{"key": "{key}"}}'},
            }
            for key in KEYS
        ]
    return [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}}]


def reply(mode: str, request: dict[str, Any], raw: bytes) -> dict[str, Any]:
    """The assistant message for this request: tool calls first, the answer once tools have run."""
    if MARKER.encode() not in raw:
        return {"role": "assistant", "content": None, "tool_calls": _calls(mode)}
    offers_final_answer = any(
        (tool.get("function") or {}).get("name") == "final_answer" for tool in request.get("tools") or []
    )
    if offers_final_answer:
        call = {"name": "final_answer", "arguments": json.dumps({"answer": ANSWER})}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_f", "type": "function", "function": call}],
        }
    return {"role": "assistant", "content": ANSWER}


USAGE = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


def completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


def stream(message: dict[str, Any], model: str, include_usage: bool) -> bytes:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        finish = "tool_calls"
    else:
        delta["content"] = message["content"]
        finish = "stop"
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": USAGE})
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            status, content_type, body = "200 OK", "application/json", b""
            if method == "POST" and path.endswith("/chat/completions"):
                request = json.loads(raw)
                mode = path.strip("/").split("/", 1)[0]
                message = reply(mode, request, raw)
                model = str(request.get("model", "bench"))
                if request.get("stream"):
                    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
                    content_type, body = "text/event-stream", stream(message, model, include_usage)
                else:
                    body = json.dumps(completion(message, model)).encode()
            elif method == "GET" and path.endswith("/models"):
                body = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model"}]}).encode()
            else:
                status, body = "404 Not Found", json.dumps({"error": {"message": f"no route {method} {path}"}}).encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: keep-alive\r\n\r\n".encode()
                + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=256)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class ScriptedServer:
    """The server in a child process: ``with ScriptedServer() as server: server.url("one")``."""

    def __enter__(self) -> ScriptedServer:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        return self

    def url(self, mode: str) -> str:
        """The OpenAI base URL (ending in /v1) for a script mode: ``one`` or ``four``."""
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()

"""A loopback HTTP server that replays recorded engine answers and records what it was sent.

Adapters for engines we cannot run here are tested against their documented
wire format, served for real over 127.0.0.1 (not an in-process mock), so the
whole httpx path, streaming included, is exercised.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Reply:
    """One canned answer."""

    status: int = 200
    body: bytes = b""
    lines: list[str] | None = None  # streamed one by one
    content_type: str = "application/json"
    line_end: str = "\n"
    cut_after: int | None = None  # stream this many lines, then drop the connection
    delay: float = 0.0  # seconds to wait before answering
    line_delay: float = 0.0  # seconds between streamed lines
    drop: bool = False  # close the connection without answering (a kept-alive connection the server dropped)
    respond: Callable[[Any], Reply] | None = None  # the reply made from the request's JSON body (a template render)

    @classmethod
    def json(cls, data: Any, status: int = 200) -> Reply:
        return cls(status=status, body=json.dumps(data).encode())

    @classmethod
    def fixture(cls, name: str) -> Reply:
        """A reply from a recorded fixture file ``fixtures/<name>.json`` (helper-written shape)."""
        data = json.loads((FIXTURES / f"{name}.json").read_text())
        response = data["response"]
        content_type = response.get("headers", {}).get("content-type", "application/json")
        if "stream" in response:
            sse = "event-stream" in content_type
            return cls(
                status=response["status"],
                lines=response["stream"],
                content_type=content_type,
                line_end="\n\n" if sse else "\n",
            )
        if "text" in response:
            return cls(status=response["status"], body=response["text"].encode(), content_type=content_type)
        return cls(status=response["status"], body=json.dumps(response["json"]).encode(), content_type=content_type)

    @classmethod
    def sse_file(cls, path: Path) -> Reply:
        """A raw SSE capture (``data: ...`` lines separated by blank lines)."""
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return cls(lines=lines, content_type="text/event-stream", line_end="\n\n")


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    client_port: int = 0  # one per TCP connection: how many connections the client opened
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class WireServer:
    """Serves ``routes`` ((method, path) -> replies, served in turn, the last one repeating)."""

    routes: dict[tuple[str, str], list[Reply]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    keep_alive: bool = False  # HTTP/1.1, streams chunked, as llama.cpp and Ollama serve them
    host: str = "127.0.0.1"  # another of this machine's addresses stands for "another machine"
    most_at_once: int = 0  # the most requests it was answering at the same time
    _in_flight: int = 0
    _counting: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, path: str, *replies: Reply) -> WireServer:
        self.routes.setdefault((method, path), []).extend(replies)
        return self

    def start(self) -> str:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def _answer(self, method: str) -> None:
                with server._counting:
                    server._in_flight += 1
                    server.most_at_once = max(server.most_at_once, server._in_flight)
                try:
                    self._reply(method)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a request it dropped): nothing to answer
                finally:
                    with server._counting:
                        server._in_flight -= 1

            def _reply(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                server.requests.append(Recorded(method, self.path, body, self.client_address[1], dict(self.headers)))
                replies = server.routes.get((method, self.path))
                if not replies:
                    self.send_response(404)
                    self.send_header("Content-Length", "18")
                    self.end_headers()
                    self.wfile.write(b"404 page not found")
                    return
                reply = replies.pop(0) if len(replies) > 1 else replies[0]
                if reply.respond is not None:
                    reply = reply.respond(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                if reply.lines is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                chunked = self.protocol_version == "HTTP/1.1"
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for index, line in enumerate(reply.lines):
                    if reply.cut_after is not None and index >= reply.cut_after:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    data = (line + reply.line_end).encode()
                    self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data) if chunked else data)
                    self.wfile.flush()
                    if reply.line_delay:
                        time.sleep(reply.line_delay)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def connections(self) -> int:
        """How many TCP connections the requests so far came over."""
        return len({r.client_port for r in self.requests})

    def bodies(self, path: str) -> list[Any]:
        return [r.body for r in self.requests if r.path == path]

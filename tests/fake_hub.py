"""A Hugging Face hub on loopback, for downloads: ``HEAD``/``GET /{repo}/resolve/{revision}/{file}`` with the
hub's headers (``X-Repo-Commit``, ``ETag``/``X-Linked-Etag`` holding the file's SHA-256, ``X-Linked-Size``), Range
requests, and faults on demand: a connection cut part way, a checksum that does not match.

Also a GGUF writer: a header the reader understands, one tensor description, padding to a size.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def gguf_bytes(metadata: dict[str, Any], *, size: int = 0, tensor_values: int = 256 * 16, tensors: int = 1) -> bytes:
    """A GGUF v3 file: ``metadata`` (str, int, list of str or of int), one Q4_K tensor description (none when
    ``tensors`` is 0), zeros up to ``size``."""

    def text(value: str) -> bytes:
        data = value.encode()
        return struct.pack("<Q", len(data)) + data

    metadata = {key: value for key, value in metadata.items() if value is not None}
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, tensors, len(metadata)))
    for key, value in metadata.items():
        out += text(key)
        if isinstance(value, str):
            out += struct.pack("<I", 8) + text(value)
        elif isinstance(value, list) and value and isinstance(value[0], int):  # int32 per layer
            out += struct.pack("<IIQ", 9, 5, len(value)) + b"".join(struct.pack("<i", item) for item in value)
        elif isinstance(value, list):
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(text(item) for item in value)
        else:
            out += struct.pack("<IQ", 10, value)  # uint64
    if tensors:
        out += text("blk.0.attn_q.weight") + struct.pack("<IQQ", 2, tensor_values // 16, 16)
        out += struct.pack("<IQ", 12, 0)  # Q4_K at offset 0
    return bytes(out) + b"\0" * max(size - len(out), 0)


def tiny_model(size: int = 3 << 20, **extra: Any) -> bytes:
    """A small qwen2-shaped GGUF (24 layers, 2 KV heads of 64) of ``size`` bytes; ``extra`` keys added to (or, set
    to None, left out of) its header."""
    return gguf_bytes(
        {
            "general.architecture": "qwen2",
            "general.name": "Tiny Test Model",
            "general.file_type": 15,
            "qwen2.context_length": 4096,
            "qwen2.block_count": 24,
            "qwen2.attention.head_count": 14,
            "qwen2.attention.head_count_kv": 2,
            "qwen2.embedding_length": 896,
            "tokenizer.ggml.tokens": ["a", "b", "c"],
            "tokenizer.chat_template": "{% for message in messages %}{{ message.content }}{% endfor %}",
            **extra,
        },
        size=size,
    )


@dataclass
class HubFile:
    body: bytes
    advertised_sha256: str | None = None  # what the hub says (default: the body's)
    advertised_size: int | None = None
    cut_after: int | None = None  # the first GET stops after this many bytes and drops the connection


@dataclass
class FakeHub:
    files: dict[str, HubFile] = field(default_factory=dict)  # "owner/repo/file" -> the file
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)
    url: str = ""

    def start(self) -> str:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                hub.requests.append((self.command, self.path, self.headers.get("Range", "")))
                parts = self.path.split("?")[0].strip("/").split("/")
                key = "/".join(parts[:2] + parts[4:]) if len(parts) > 4 and parts[2] == "resolve" else ""
                found = hub.files.get(key)
                if found is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = found.body
                sha = found.advertised_sha256 or hashlib.sha256(data).hexdigest()
                start = 0
                ranged = self.headers.get("Range", "")
                if ranged.startswith("bytes="):
                    start = int(ranged[6:].split("-")[0])
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{sha}"')
                self.send_header("X-Linked-Etag", f'"{sha}"')
                self.send_header("X-Linked-Size", str(found.advertised_size or len(data)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(data) - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                if found.cut_after is not None and not start:
                    self.wfile.write(data[: found.cut_after])
                    self.wfile.flush()
                    found.cut_after = None
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def cached_files(home: Path) -> list[Path]:
    """Every model file, blob or partial download in the Hugging Face cache under ``home``."""
    return [
        p
        for p in home.rglob("*")
        if (p.is_file() or p.is_symlink())
        and (p.suffix == ".gguf" or "incomplete" in p.name or p.parent.name == "blobs")
    ]

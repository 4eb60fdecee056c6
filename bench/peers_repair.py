"""The coding agents a user would otherwise pick, on Cortana's local model and Cortana's bug-fix tasks.

What is measured: how many tasks each peer agent finishes, and in how long, when it is pointed at the SAME
llama.cpp server Cortana's fix workflow uses (the embedded engine, ``EmbeddedClient.start(MODEL)``, with
Cortana's defaults: 8,192-token window, its thread counts, its sample slots), on the same tasks, under the same
time budget as Cortana's fix workflow (``fix.budget_seconds``, 180 s), with each peer's own defaults: no prompt,
sampling, edit-format or context tuning. Compare with ``bench/repair.py``'s ``workflow`` arm.

The peers (pinned in ``bench/peers-requirements.txt``; each in a venv of its own, ``.venv-peers/PEER/``, made
on first use, since their dependencies conflict with each other and never enter Cortana's):

- ``aider`` (aider-chat): ``aider --model openai/MODEL --openai-api-base URL --yes-always --no-auto-commits
  --no-show-model-warnings --no-check-update --no-analytics --message PROMPT``. No files are named on its
  command line: it adds those the prompt or the model's answer mentions (it asks; the answer is yes) and sees the
  rest through its repository map (on, 1,024 tokens, for a model it does not know); its edit format is its
  default for such a model (``whole``). The workspace is a git repository with one commit (aider needs one).
- ``mini-swe-agent``: ``mini --model openai/MODEL --yolo --exit-immediately --task PROMPT``: its ``mini``
  command with its default config (``mini.yaml``: bash tool calls, no step limit), run without confirmation
  (``--yolo``) and ending when the agent submits (``--exit-immediately``), which is how it runs unattended.
  ``MSWEA_CONFIGURED=true`` skips its first-run questions and ``MSWEA_COST_TRACKING=ignore_errors`` lets it run
  a model litellm has no price for (both from its local-model guide).
- ``gptme``: ``gptme --non-interactive --model local/MODEL PROMPT`` (``local`` is its provider for an
  OpenAI-compatible server at ``OPENAI_BASE_URL``; non-interactive implies no confirmations and exits when the
  model stops calling tools). Chosen as the third because it is a terminal coding agent that users pick, has a
  documented non-interactive mode against any OpenAI-compatible endpoint, and installs and runs on Python 3.11
  here; open-interpreter (0.4.3) takes a message without a terminal only on stdin (``--stdin``), and the tasks
  run with stdin closed. With its defaults (every tool, ``tool`` format for a local model) its first request is
  about 8,900 tokens, more than the engine's window: the engine answers 400 and gptme stops.

Every peer gets the same environment: ``OPENAI_API_KEY``, ``OPENAI_API_BASE`` and ``OPENAI_BASE_URL`` (the
proxy below), ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (litellm reads its bundled price list instead of fetching
it), a temporary ``HOME`` and XDG folders (no user configuration, history or caches), ``NO_COLOR=1``,
``TERM=dumb``, and a ``PATH`` whose ``python`` is this one (it has pytest, so a peer can run the tests as a user
would); the peer itself runs from its own venv.

How one task runs, per peer (tasks in order, the peers in turn on each task, so a slow moment of the machine
costs all alike): a fresh temporary copy of the task's repository (``git init`` with one commit for aider);
the task's ``prompt``, verbatim, as the peer's message, nothing added; stdin closed; no network but loopback:
the peer runs in a network namespace of its own (``unshare --net``), where a relay on 127.0.0.1 carries its
requests over a Unix socket to the proxy (without ``unshare``, the results record ``network: not isolated``).
At the budget the peer's whole process group is killed, and whatever it left in the workspace is judged.
Success is the task's own check: for the three-file tasks ``check_workspace`` (the tests, as they were, must
pass; a changed test file fails), for the real-project tasks ``real_tasks.check``. Wall seconds are the peer's
process, from start to exit or kill (the engine is already loaded: Cortana's ``bench/repair.py`` counts an
engine start per task, so this favours the peers by that start).

Tokens are counted the same way for every peer, by a loopback proxy between the peers and the engine that
forwards every request as it is (streaming included) and reads each response's ``usage`` (for a stream, from
its last chunk that has one; llama.cpp's ``timings`` when a stream has none): prompt tokens are the whole
prompt each call sent, cached or not. Between runs the proxy cuts any request still open, waits until the
engine is idle, and overwrites every slot's cached prompt with a prompt of a few tokens, so each run starts as
cold as the first (no peer reads another's, or its own previous task's, cached prompt).

Per peer and split: fixed / tasks, median and worst wall seconds, mean model calls, mean prompt and completion
tokens. Rows go to ``bench/results/peers_repair_SET_MODEL[_LABEL].json``, each with the end of what the peer
printed, any error the engine answered, and its model calls one by one (seconds, tokens, finish reason, tool
calls, the beginning of the answer's text: to see why a peer failed, e.g. a model that writes no tool call).
Run it with Cortana's venv (``.venv/bin/python``: the engine, the bundled models, pytest), one run at a time.

    python bench/peers_repair.py --model qwen2.5-coder-1.5b --set three-file
    python bench/peers_repair.py --model qwen2.5-coder-1.5b --set three-file --split held-out
    python bench/peers_repair.py --model qwen2.5-coder-1.5b --set real --split dev --peers aider,gptme
    python bench/peers_repair.py --model qwen2.5-coder-0.5b --tasks fix-discount --peers mini-swe-agent --keep
    python bench/peers_repair.py --install            # only make the peers' venvs
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentic_tasks import SPLITS, check_workspace, copy_repo, load_tasks
from report import RESULTS, save, table

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS_VENVS = ROOT / ".venv-peers"
REQUIREMENTS = BENCH / "peers-requirements.txt"
MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
SETS = ("three-file", "real")
BUDGET_SECONDS = 180.0
"""Cortana's fix workflow's budget (``fix.budget_seconds``): the peers get the same."""
RELAY_PORT = 8080
"""The port of the relay inside a peer's own network namespace (nothing else listens there)."""
TAIL = 4000
"""Characters kept of the end of what a peer printed, stdout and stderr each."""
REPLY = 200
"""Characters kept of the beginning of each answer's text (what the model wrote, to see why a peer failed)."""
CALLS_KEPT = 40
"""Model calls a row lists one by one (the first ones); the counts cover them all."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
CALL_FIELDS = ("seconds", "stream", "status", "prompt_tokens", "completion_tokens", "finish_reason", "tool_calls",
               "reply", "aborted")  # fmt: skip
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailers", "transfer-encoding", "upgrade", "host",
     "content-length", "authorization", "accept-encoding"}
)  # fmt: skip


# -- the peers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    name: str
    distribution: str
    """The PyPI package, whose version the results record."""
    script: str
    """The command in the peer's venv."""
    arguments: Callable[[str, str], list[str]]
    """The arguments after the command, for a model name and the prompt (``@URL@``: the endpoint)."""
    environment: dict[str, str]
    needs_git: bool = False

    @property
    def venv(self) -> Path:
        return PEERS_VENVS / self.name

    def command(self, model: str, prompt: str) -> list[str]:
        return [str(self.venv / "bin" / self.script), *self.arguments(model, prompt)]


AIDER_FLAGS = ("--yes-always", "--no-auto-commits", "--no-show-model-warnings", "--no-check-update", "--no-analytics")
"""aider without questions, commits, update checks or analytics."""

PEERS = {
    peer.name: peer
    for peer in (
        Peer(
            "aider",
            "aider-chat",
            "aider",
            lambda model, prompt: [
                "--model",
                f"openai/{model}",
                "--openai-api-base",
                "@URL@",
                *AIDER_FLAGS,
                "--message",
                prompt,
            ],
            {},
            needs_git=True,
        ),
        Peer(
            "mini-swe-agent",
            "mini-swe-agent",
            "mini",
            lambda model, prompt: ["--model", f"openai/{model}", "--yolo", "--exit-immediately", "--task", prompt],
            {"MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors"},
        ),
        Peer(
            "gptme",
            "gptme",
            "gptme",
            lambda model, prompt: ["--non-interactive", "--model", f"local/{model}", prompt],
            {},
        ),
    )
}


def peer_requirements() -> dict[str, list[str]]:
    """Each peer's section of ``bench/peers-requirements.txt``: its pinned requirements."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in REQUIREMENTS.read_text().splitlines():
        if header := re.fullmatch(r"#\s*\[([\w.-]+)\]\s*", raw.strip()):
            current = sections.setdefault(header[1], [])
            continue
        line = raw.split("#", 1)[0].strip()
        if line and current is not None:
            current.append(line)
    return sections


def ensure_peer(peer: Peer) -> None:
    """Make ``.venv-peers/PEER/`` with the peer's pinned requirements, unless it already has exactly those."""
    wanted = peer_requirements().get(peer.name)
    if not wanted:
        raise SystemExit(f"{REQUIREMENTS.name} has no [{peer.name}] section")
    marker = peer.venv / "peers-requirements.txt"
    text = "\n".join(wanted) + "\n"
    if marker.is_file() and marker.read_text() == text and (peer.venv / "bin" / peer.script).is_file():
        return
    print(f"installing {peer.name} into {peer.venv.relative_to(ROOT)}: {' '.join(wanted)}", flush=True)
    if not (peer.venv / "bin" / "python").is_file():
        subprocess.run([sys.executable, "-m", "venv", str(peer.venv)], check=True)
    pip = [str(peer.venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, *wanted], capture_output=True, text=True)
    if done.returncode != 0:
        noise = re.compile(r"^WARNING: Location '")
        lines = [line for line in (done.stdout + done.stderr).splitlines() if not noise.match(line)]
        raise SystemExit(f"installing {peer.name} failed:\n" + "\n".join(lines[-30:]))
    marker.write_text(text)


def peer_versions(peer: Peer) -> dict[str, str]:
    """The versions of the peer and of the model clients under it, in its venv."""
    names = [peer.distribution, "litellm", "openai", "httpx"]
    code = (
        "import importlib.metadata as m, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: found[name] = m.version(name)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(found))"
    )
    done = subprocess.run([str(peer.venv / "bin" / "python"), "-c", code, *names], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


# -- the tasks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchTask:
    id: str
    kind: str
    split: str
    prompt: str
    make: Callable[[Path], Path]
    """Lay the task's repository at a folder that does not exist yet; the workspace."""
    judge: Callable[[Path], tuple[bool, str]]


def three_file_tasks(ids: list[str] | None, split: str | None) -> list[BenchTask]:
    """The code tasks of ``bench/tasks/`` (questions have no fix to judge)."""
    found = []
    for task in load_tasks(ids):
        if task.kind == "question" or (split and task.split != split):
            continue

        def judge(workspace: Path, task: Any = task) -> tuple[bool, str]:
            verdict = check_workspace(task, workspace)
            return verdict.ok, verdict.reason

        found.append(
            BenchTask(task.id, task.kind, task.split, task.prompt, lambda path, task=task: copy_repo(task, path), judge)
        )
    return found


def real_project_tasks(ids: list[str] | None, split: str | None) -> list[BenchTask]:
    """The single-token bugs in real libraries of ``bench/real_tasks.py``."""
    try:
        import real_tasks
    except ModuleNotFoundError as error:
        if error.name != "real_tasks":
            raise
        raise SystemExit("bench/real_tasks.py is not there (yet): no real-project tasks to run") from None
    found = []
    for task in real_tasks.load_real_tasks(ids=ids, split=split):

        def make(path: Path, task: Any = task) -> Path:
            return Path(real_tasks.materialize(task, path))

        def judge(workspace: Path, task: Any = task) -> tuple[bool, str]:
            verdict = real_tasks.check(task, workspace)
            return verdict.ok, verdict.reason

        found.append(BenchTask(task.id, task.kind, task.split, task.prompt, make, judge))
    return found


# -- the proxy: every peer's requests, counted the same way ---------------------------------------


def usage_of(payload: Any) -> tuple[int, int, int | None, str] | None:
    """(prompt, completion, cached, found in) from one response body or stream chunk; None if it has none."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return usage["prompt_tokens"], int(usage.get("completion_tokens") or 0), cached, "usage"
    timings = payload.get("timings")  # llama.cpp's, on a stream's last chunk
    if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
        cached = int(timings.get("cache_n") or 0)
        return timings["prompt_n"] + cached, int(timings.get("predicted_n") or 0), cached, "timings"
    return None


def reply_of(payload: Any) -> dict[str, Any]:
    """What a non-streamed answer was: its finish reason, how many tool calls, and its text's beginning."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return {}
    message = choices[0].get("message") or {}
    return {
        "finish_reason": choices[0].get("finish_reason"),
        "tool_calls": len(message.get("tool_calls") or []),
        "reply": (message.get("content") or "")[:REPLY],
    }


class StreamUsage:
    """Reads a server-sent-event stream as it passes: the usage of its last chunk that has one, and the answer
    (finish reason, tool calls, the text's beginning) as ``reply_of`` tells a non-streamed one."""

    def __init__(self) -> None:
        self.buffer = b""
        self.found: tuple[int, int, int | None, str] | None = None
        self.text = ""
        self.tool_calls: set[int] = set()
        self.finish_reason: str | None = None

    def feed(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            with contextlib.suppress(ValueError):
                chunk = json.loads(line[5:])
                self.read_choice(chunk)
                found = usage_of(chunk)
                if found and (self.found is None or found[3] == "usage" or self.found[3] != "usage"):
                    self.found = found

    def read_choice(self, chunk: Any) -> None:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not choices or not isinstance(choices[0], dict):
            return
        delta = choices[0].get("delta") or {}
        if len(self.text) < REPLY and isinstance(delta.get("content"), str):
            self.text = (self.text + delta["content"])[:REPLY]
        for call in delta.get("tool_calls") or []:
            self.tool_calls.add(call.get("index", 0) if isinstance(call, dict) else 0)
        self.finish_reason = choices[0].get("finish_reason") or self.finish_reason

    def reply(self) -> dict[str, Any]:
        return {"finish_reason": self.finish_reason, "tool_calls": len(self.tool_calls), "reply": self.text}


class TokenProxy:
    """A loopback proxy on a Unix socket to the engine; every model call is recorded (tokens from ``usage``).

    The peers present ``key``; the proxy sends the engine's own key on. One peer runs at a time, so
    ``take()`` returns, and forgets, the calls since the last ``take()``.
    """

    def __init__(self, upstream: str, upstream_key: str, socket_path: Path) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.upstream_key = upstream_key
        self.key = secrets.token_urlsafe(24)
        self.socket_path = socket_path
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.open: set[http.client.HTTPConnection] = set()
        self.server = _ProxyServer(str(socket_path), _ProxyHandler)
        self.server.proxy = self
        self.thread = threading.Thread(target=self.server.serve_forever, name="token-proxy", daemon=True)

    def __enter__(self) -> TokenProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()
        self.server.shutdown()
        self.server.server_close()

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            calls, self.calls = self.calls, []
        return calls

    def connection(self, timeout: float = 1800.0) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        with self.lock:
            self.open.add(connection)
        return connection

    def release(self, connection: http.client.HTTPConnection) -> None:
        with self.lock:
            self.open.discard(connection)
        connection.close()

    def abort(self) -> None:
        """Cut every request still open to the engine (a killed peer's), so the engine stops generating it."""
        with self.lock:
            connections = list(self.open)
        for connection in connections:
            if connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)

    def engine(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request of the benchmark's own to the engine (not counted)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=300)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Authorization": f"Bearer {self.upstream_key}", "Content-Type": "application/json"}
            connection.request(method, path, data, headers)
            response = connection.getresponse()
            text = response.read()
            if response.status >= 400:
                raise RuntimeError(f"engine answered {response.status} to {path}: {text[:300]!r}")
            return json.loads(text)
        finally:
            connection.close()

    def settle(self, timeout: float = 300.0) -> float:
        """Cut open requests, wait until the engine is idle, and overwrite each slot's cached prompt; seconds."""
        started = time.perf_counter()
        self.abort()
        slots: list[dict[str, Any]] = []
        while time.perf_counter() - started < timeout:
            slots = self.engine("GET", "/slots")
            if not any(slot.get("is_processing") for slot in slots):
                break
            time.sleep(0.5)
        for slot in slots:
            tiny = {"messages": [{"role": "user", "content": "."}], "max_tokens": 1, "id_slot": slot["id"]}
            self.engine("POST", "/v1/chat/completions", tiny)
        return time.perf_counter() - started


class _ProxyServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    proxy: TokenProxy


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def address_string(self) -> str:
        return "peer"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.forward()

    def do_POST(self) -> None:
        self.forward()

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline().strip():
                pass
            return body
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_whole(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def forward(self) -> None:
        proxy = self.server.proxy
        body = self.read_body()
        if self.headers.get("Authorization", "") != f"Bearer {proxy.key}":
            self.send_whole(401, [("Content-Type", "application/json")], b'{"error": "wrong key"}')
            return
        model_call = self.path.rstrip("/").endswith(("/chat/completions", "/completions", "/responses"))
        call: dict[str, Any] = {"path": self.path, "model_call": model_call}
        if model_call:
            with contextlib.suppress(ValueError):
                request = json.loads(body)
                call["stream"] = bool(request.get("stream")) if isinstance(request, dict) else None
        started = time.perf_counter()
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        headers["Authorization"] = f"Bearer {proxy.upstream_key}"
        headers["Content-Length"] = str(len(body))
        connection = proxy.connection()
        try:
            connection.request(self.command, self.path, body, headers)
            response = connection.getresponse()
            call["status"] = response.status
            passed = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            streamed = "text/event-stream" in (response.getheader("Content-Type") or "")
            if streamed:
                stream = StreamUsage()
                self.send_response(response.status)
                for name, value in passed:
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while data := response.read1(65536):
                    stream.feed(data)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                stream.feed(b"\n")
                found = stream.found
                call.update(stream.reply())
            else:
                data = response.read()
                self.send_whole(response.status, passed, data)
                found = None
                with contextlib.suppress(ValueError):
                    payload = json.loads(data)
                    found = usage_of(payload)
                    call.update(reply_of(payload))
                if response.status >= 400:
                    call["error"] = data[:500].decode(errors="replace")
            if found:
                call.update(prompt_tokens=found[0], completion_tokens=found[1], cached_tokens=found[2],
                            counted_from=found[3])  # fmt: skip
        except OSError as error:  # the peer was killed, or its request cut by abort()
            call["aborted"] = f"{type(error).__name__}: {error}"
            self.close_connection = True
        finally:
            proxy.release(connection)
            call["seconds"] = round(time.perf_counter() - started, 2)
            with proxy.lock:
                proxy.calls.append(call)


# -- running a peer ------------------------------------------------------------------------------

LAUNCHER = r"""
import json, os, socket, subprocess, sys, threading
spec = json.loads(sys.argv[1])
if spec["ip"]:
    subprocess.run([spec["ip"], "link", "set", "lo", "up"], check=True)
listener = socket.create_server(("127.0.0.1", spec["port"]))
url = "http://127.0.0.1:%d/v1" % listener.getsockname()[1]

def pump(source, target):
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    for each in (source, target):
        try:
            each.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def relay():
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(spec["socket"])
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

threading.Thread(target=relay, daemon=True).start()
argv = [part.replace("@URL@", url) for part in spec["argv"]]
env = {name: value.replace("@URL@", url) for name, value in spec["env"].items()}
sys.exit(subprocess.Popen(argv, cwd=spec["cwd"], env=env, stdin=subprocess.DEVNULL).wait())
"""
"""Runs as the peer's process group's leader (inside its network namespace): loopback up, a relay from
127.0.0.1 to the proxy's Unix socket, then the peer, whose exit status it returns."""


def network_namespaces() -> bool:
    """Whether this machine lets the benchmark give each peer a network namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    return done.returncode == 0


def peer_environment(peer: Peer, home: Path, key: str) -> dict[str, str]:
    """What every peer sees: the endpoint and key, a temporary home, no colour, this Python's pytest."""
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {
        "PATH": path,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "OPENAI_API_KEY": key,
        "OPENAI_API_BASE": "@URL@",
        "OPENAI_BASE_URL": "@URL@",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@localhost",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@localhost",
    }
    env.update(peer.environment)
    return env


def commit_workspace(workspace: Path, env: dict[str, str]) -> None:
    """Make ``workspace`` a git repository with one commit of everything in it."""
    if (workspace / ".git").exists():
        return
    for command in (
        ["init", "-q"],
        ["config", "user.name", env["GIT_AUTHOR_NAME"]],
        ["config", "user.email", env["GIT_AUTHOR_EMAIL"]],
        ["add", "-A"],
        ["commit", "-q", "--no-verify", "-m", "the task's repository"],
    ):
        subprocess.run(["git", *command], cwd=workspace, env=env, check=True, capture_output=True)


def run_peer(
    peer: Peer, task: BenchTask, model: str, proxy: TokenProxy, budget: float, netns: bool, keep: bool
) -> dict[str, Any]:
    """One task, one peer: its process under the budget, then the task's own check; the row."""
    temporary = Path(tempfile.mkdtemp(prefix=f"peers-{peer.name}-{task.id}-"))
    workspace = task.make(temporary / "work")
    home = temporary / "home"
    home.mkdir()
    env = peer_environment(peer, home, proxy.key)
    if peer.needs_git:
        commit_workspace(workspace, env)
    spec = {
        "ip": shutil.which("ip") if netns else None,
        "port": RELAY_PORT if netns else 0,
        "socket": str(proxy.socket_path),
        "argv": peer.command(model, task.prompt),
        "env": env,
        "cwd": str(workspace),
    }
    launcher = [sys.executable, "-c", LAUNCHER, json.dumps(spec)]
    command = ["unshare", "--net", *launcher] if netns else launcher
    proxy.take()
    timed_out = False
    with open(temporary / "stdout.txt", "wb") as stdout, open(temporary / "stderr.txt", "wb") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True
        )
        try:
            process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        wall = time.perf_counter() - started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what the peer left running (the relay, a server it started)
    settle_seconds = proxy.settle()
    calls = [call for call in proxy.take() if call.get("model_call")]
    ok, reason = task.judge(workspace)
    if not ok and timed_out:
        reason = f"killed at the {budget:.0f}s budget; {reason}"
    counted = [call for call in calls if "prompt_tokens" in call]
    row: dict[str, Any] = {
        "peer": peer.name,
        "id": task.id,
        "kind": task.kind,
        "split": task.split,
        "ok": ok,
        "reason": reason,
        "timed_out": timed_out,
        "exit_code": None if timed_out else process.returncode,
        "wall_seconds": round(wall, 2),
        "model_calls": len(calls),
        "calls_counted": len(counted),
        "prompt_tokens": sum(call["prompt_tokens"] for call in counted),
        "completion_tokens": sum(call["completion_tokens"] for call in counted),
        "cached_tokens": sum(call.get("cached_tokens") or 0 for call in counted),
        "counted_from": sorted({call["counted_from"] for call in counted}),
        "streamed_calls": sum(bool(call.get("stream")) for call in calls),
        "engine_errors": [f"{call.get('status')}: {call['error'][:300]}" for call in calls if call.get("error")][:5],
        "aborted_calls": sum("aborted" in call for call in calls),
        "settle_seconds": round(settle_seconds, 1),
        "calls": [{key: call[key] for key in CALL_FIELDS if key in call} for call in calls[:CALLS_KEPT]],
        "stdout_tail": _tail(temporary / "stdout.txt"),
        "stderr_tail": _tail(temporary / "stderr.txt"),
    }
    if keep:
        row["workspace"] = str(workspace)
    else:
        shutil.rmtree(temporary, ignore_errors=True)
    return row


def _tail(path: Path) -> str:
    text = ANSI.sub("", path.read_bytes()[-4 * TAIL :].decode(errors="replace"))
    return text[-TAIL:]


# -- a run ---------------------------------------------------------------------------------------


async def run_model(
    model: str, tasks: list[BenchTask], peers: list[Peer], budget: float, netns: bool, keep: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every task on every peer, against one engine for ``model``; the rows and the engine's settings."""
    from cortana.models.embedded import EmbeddedClient

    started = time.perf_counter()
    client = await EmbeddedClient.start(model)
    server: Any = client.server
    engine = {
        "url": server.url,
        "start_seconds": round(time.perf_counter() - started, 1),
        **{name: getattr(server, name) for name in ("context_window", "threads", "batch_threads", "parallel",
                                                    "samples", "speculation") if hasattr(server, name)},
    }  # fmt: skip
    rows: list[dict[str, Any]] = []
    try:
        folder = Path(tempfile.mkdtemp(prefix="peers-proxy-"))
        with TokenProxy(server.url, server.api_key, folder / "proxy.sock") as proxy:
            await asyncio.to_thread(proxy.settle)
            for task in tasks:  # the peers take turns task by task: a slow moment costs all alike
                for peer in peers:
                    row = await asyncio.to_thread(run_peer, peer, task, model, proxy, budget, netns, keep)
                    rows.append(row)
                    print(f"  {model} {peer.name:15} {task.id:28} {task.split:8} "
                          f"{'ok  ' if row['ok'] else 'FAIL'} {row['wall_seconds']:6.1f}s "
                          f"{row['model_calls']:3} calls {row['prompt_tokens']:7} in {row['completion_tokens']:6} "
                          f"out  {row['reason'][:90]}", flush=True)  # fmt: skip
    finally:
        await client.aclose()
        shutil.rmtree(folder, ignore_errors=True)
    return rows, engine


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [row["wall_seconds"] for row in rows]
    return {
        "fixed": sum(row["ok"] for row in rows),
        "tasks": len(rows),
        "median_wall_seconds": round(statistics.median(walls), 1) if walls else None,
        "worst_wall_seconds": round(max(walls), 1) if walls else None,
        "killed_at_budget": sum(row["timed_out"] for row in rows),
        "mean_model_calls": round(statistics.fmean(row["model_calls"] for row in rows), 1) if rows else None,
        "mean_prompt_tokens": round(statistics.fmean(row["prompt_tokens"] for row in rows)) if rows else None,
        "mean_completion_tokens": round(statistics.fmean(row["completion_tokens"] for row in rows)) if rows else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=SETS, default="three-file", help="the tasks (default: three-file)")
    parser.add_argument("--split", choices=SPLITS, help="only the development or the held-out tasks")
    parser.add_argument("--tasks", help="comma-separated task ids")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--model", default=",".join(MODELS), help="comma-separated bundled models")
    parser.add_argument(
        "--budget-seconds",
        type=float,
        default=BUDGET_SECONDS,
        help=f"seconds a peer may take on one task, then it is killed (default {BUDGET_SECONDS:.0f})",
    )
    parser.add_argument("--label", default="", help="a suffix for the results file")
    parser.add_argument("--keep", action="store_true", help="keep each run's workspace and output, and say where")
    parser.add_argument("--install", action="store_true", help="only make the peers' venvs")
    args = parser.parse_args()
    names = [name.strip() for name in args.peers.split(",") if name.strip()]
    if unknown := [name for name in names if name not in PEERS]:
        raise SystemExit(f"unknown peer(s): {', '.join(unknown)}; known: {', '.join(PEERS)}")
    peers = [PEERS[name] for name in names]
    for peer in peers:
        ensure_peer(peer)
    if args.install:
        return
    ids = args.tasks.split(",") if args.tasks else None
    tasks = (three_file_tasks if args.set == "three-file" else real_project_tasks)(ids, args.split)
    if not tasks:
        raise SystemExit("no tasks to run")
    netns = network_namespaces()
    if not netns:
        print("note: no network namespaces here (unshare --net): the peers run without network isolation")
    versions = {peer.name: peer_versions(peer) for peer in peers}
    for model in [name.strip() for name in args.model.split(",") if name.strip()]:
        started = time.perf_counter()
        rows, engine = asyncio.run(run_model(model, tasks, peers, args.budget_seconds, netns, args.keep))
        summaries = {
            f"{peer.name}/{split}": summary([r for r in rows if r["peer"] == peer.name and r["split"] == split])
            for peer in peers
            for split in SPLITS
            if any(r["peer"] == peer.name and r["split"] == split for r in rows)
        }
        print(f"\npeers on {args.set} tasks, {model}, {args.budget_seconds:.0f}s budget")
        table(
            ["peer / split", "fixed", "median s", "worst s", "killed", "model calls", "prompt tok", "completion tok"],
            [[key, f"{s['fixed']}/{s['tasks']}", s["median_wall_seconds"], s["worst_wall_seconds"],
              s["killed_at_budget"], s["mean_model_calls"], s["mean_prompt_tokens"], s["mean_completion_tokens"]]
             for key, s in summaries.items()],
        )  # fmt: skip
        name = f"peers_repair_{args.set}_{model}{'_' + args.label if args.label else ''}.json"
        save(
            RESULTS / name,
            {
                "set": args.set,
                "model": model,
                "budget_seconds": args.budget_seconds,
                "network": "own network namespace, loopback only" if netns else "not isolated",
                "engine": engine,
                "peers": {
                    peer.name: {"versions": versions[peer.name], "command": peer.command(model, "PROMPT")}
                    for peer in peers
                },
                "seconds": round(time.perf_counter() - started, 1),
                "summaries": summaries,
                "rows": rows,
            },
        )


if __name__ == "__main__":
    main()

"""Shared test setup: unit tests may only talk to loopback, never the network."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

# A `cortana` a test starts stops its embedded engine when it exits, rather than leaving it loaded for the next
# (tests of that, tests/integration/test_resident_engine.py, ask for it). Subprocesses inherit this.
os.environ["CORTANA_KEEP_ALIVE"] = "0"

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def own_addresses() -> set[str]:
    """This machine's own IPv4 addresses (the kernel's LOCAL routes): a server on one of them stays on the machine,
    yet it is not loopback, so it stands for "another machine" in tests of where prompts may go."""
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError:
        return set()
    return {lines[i - 1].split()[-1] for i, line in enumerate(lines) if i and "/32 host LOCAL" in line}


OWN_ADDRESSES = own_addresses()


def _is_local(address: object) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", "", None) or host in OWN_ADDRESSES:
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded(real):  # type: ignore[no-untyped-def]
    def connect(self, address):  # type: ignore[no-untyped-def]
        if not _is_local(address):
            raise RuntimeError(f"tests may not reach the network (tried {address!r}); serve fixtures on loopback")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))


LLAMA = Path(__file__).parent / "fixtures" / "llamacpp"


@pytest.fixture
def scripted_engine() -> Iterator:  # type: ignore[type-arg]
    """A loopback server answering as the llama.cpp fixtures record; tests add the chat replies.

    Its ``/props`` leaves out the chat template, so answers take the chat API the tests script
    (``/v1/chat/completions``) rather than the guided path, which is tested on its own
    (tests/unit/test_guided.py, tests/integration/test_guided_calls.py).
    """
    from tests.wire import Reply, WireServer

    props = json.loads((LLAMA / "q05_props.json").read_text())
    del props["chat_template"]
    server = WireServer()
    server.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    server.add("GET", "/props", Reply.json(props))
    server.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    server.url = server.start()  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator:  # type: ignore[type-arg]
    """A real PostgreSQL with pgvector (the ``pgserver`` wheel), started once per session on a unix socket."""
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("postgres"), cleanup_mode="stop")
    yield server
    server.cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    """Each memory backend in turn: the memory suites run against both (tests/backends.py)."""
    from tests.backends import Backend

    server = request.getfixturevalue("postgres_server") if request.param == "postgres" else None
    made = Backend(request.param, tmp_path, server)
    yield made
    made.close()

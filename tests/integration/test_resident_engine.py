"""The resident embedded engine (``keep_alive``): shared by later processes, gone after its idle time.

Real processes on the real 0.5B model: each client below is a separate Python
process (as each ``cortana`` is), and the engine's record and leases live in a
cache folder of the test's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Message
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.models.embedded import EmbeddedClient, EmbeddedServer, resolve_model_path
from cortana.models.resident import ResidentServer, engine_record_path
from tests.integration.conftest import TEST_MODEL

KEEP_ALIVE = 3.0
SAY_OK = ModelRequest([Message.user("Say OK.")], settings=ModelSettings(temperature=0, max_tokens=8))
CLIENT = textwrap.dedent(
    """
    import asyncio, json, sys
    from cortana.models.embedded import EmbeddedClient

    async def main():
        client = await EmbeddedClient.start(sys.argv[1], threads=1, context_window=2048, keep_alive=float(sys.argv[2]))
        server = client.server
        print(json.dumps({"pid": server.pid, "reused": server.reused, "url": server.url}), flush=True)
        if sys.argv[3] == "stay":
            sys.stdin.read()  # until the test kills this process
        await client.aclose()

    asyncio.run(main())
    """
)


@pytest.fixture
def model_path() -> Path:
    return resolve_model_path(TEST_MODEL)[1]  # joined in the shared cache folder: not joined again per test


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_path: Path) -> Iterator[Path]:
    """A cache folder of the test's own (engine records, leases, log); the engines it started are stopped after."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("CORTANA_CACHE_DIR", str(folder))
    yield folder
    for record in (folder / "engines").glob("*.json") if (folder / "engines").is_dir() else ():
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(json.loads(record.read_text())["pid"], signal.SIGKILL)


def client_process(model_path: Path, *, keep_alive: float = KEEP_ALIVE, stay: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(model_path), str(keep_alive), "stay" if stay else "close"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def started(process: subprocess.Popen[str]) -> dict[str, object]:
    """What the client process says about the engine it got."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the client process failed (exit {process.wait()})"
    return json.loads(line)


def run_client(model_path: Path, keep_alive: float = KEEP_ALIVE) -> dict[str, object]:
    process = client_process(model_path, keep_alive=keep_alive)
    info = started(process)
    assert process.wait(timeout=120) == 0
    return info


def alive(pid: object) -> bool:
    assert isinstance(pid, int)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: object, within: float) -> float:
    """Seconds until ``pid`` exits; fails after ``within``."""
    begun = time.monotonic()
    while alive(pid):
        if time.monotonic() - begun > within:
            pytest.fail(f"the engine (pid {pid}) still runs {within:.0f}s later")
        time.sleep(0.1)
    return time.monotonic() - begun


def test_a_second_process_uses_the_engine_the_first_left_and_it_exits_after_its_idle_time(
    own_cache: Path, model_path: Path
) -> None:
    first = run_client(model_path)
    assert first["reused"] is False
    assert alive(first["pid"]), "the engine outlives the process that started it"
    second = run_client(model_path)
    assert second == {**first, "reused": True}, "the second process uses the same engine, loaded already"
    record = engine_record_path(model_path)
    assert oct(record.stat().st_mode & 0o777) == "0o600", "the record holds the API key: private"
    waited = wait_gone(second["pid"], within=KEEP_ALIVE + 10)
    assert waited >= KEEP_ALIVE - 1.0, "nobody used it, but it did not wait its idle time"
    assert not record.exists(), "an engine that exits removes its record"


def test_an_engine_in_use_stays_and_a_killed_user_does_not_keep_it_alive(own_cache: Path, model_path: Path) -> None:
    user = client_process(model_path, stay=True)
    info = started(user)
    try:
        time.sleep(KEEP_ALIVE + 2)
        assert alive(info["pid"]), "a connected process keeps the engine"
    finally:
        user.kill()  # no aclose(), no goodbye: the kernel drops its lease
        user.wait()
    wait_gone(info["pid"], within=KEEP_ALIVE + 10)


def test_processes_starting_at_once_share_one_engine(own_cache: Path, model_path: Path) -> None:
    processes = [client_process(model_path) for _ in range(2)]
    infos = [started(process) for process in processes]
    assert all(process.wait(timeout=120) == 0 for process in processes)
    assert infos[0]["pid"] == infos[1]["pid"] and infos[0]["url"] == infos[1]["url"]
    assert sorted(info["reused"] for info in infos) == [False, True], "one loaded it, the other waited and used it"


async def test_an_engine_of_other_settings_or_version_is_not_used(own_cache: Path, model_path: Path) -> None:
    resident = await EmbeddedClient.start(str(model_path), threads=1, context_window=2048, keep_alive=30)
    try:
        assert isinstance(resident.server, ResidentServer) and not resident.server.reused
        other_window = await EmbeddedClient.start(str(model_path), threads=1, context_window=1024, keep_alive=30)
        try:
            assert isinstance(other_window.server, EmbeddedServer), "another window: an engine of its own"
            assert other_window.server.pid != resident.server.pid
            assert (await complete(other_window, SAY_OK)).message.content.strip()
        finally:
            await other_window.aclose()
        record_path = engine_record_path(model_path)
        record = json.loads(record_path.read_text())
        assert record["pid"] == resident.server.pid, "the resident engine's record stays"
        record_path.write_text(json.dumps({**record, "versions": {"cortana": "0.0.1", "xllamacpp": "0"}}))
        other_version = await EmbeddedClient.start(str(model_path), threads=1, context_window=2048, keep_alive=30)
        try:
            assert isinstance(other_version.server, EmbeddedServer), "another version's engine is never used"
        finally:
            await other_version.aclose()
    finally:
        await resident.aclose()


async def test_a_damaged_record_or_a_dead_engine_means_a_new_one(own_cache: Path, model_path: Path) -> None:
    record_path = engine_record_path(model_path)
    record_path.write_text("{not json")
    first = await EmbeddedClient.start(str(model_path), threads=1, context_window=2048, keep_alive=30)
    assert isinstance(first.server, ResidentServer) and not first.server.reused
    pid = first.server.pid
    await first.aclose()
    os.kill(pid, signal.SIGKILL)  # crashed: its record stays behind, naming a dead process
    await asyncio.to_thread(wait_gone, pid, 10)
    second = await EmbeddedClient.start(str(model_path), threads=1, context_window=2048, keep_alive=30)
    try:
        assert isinstance(second.server, ResidentServer) and not second.server.reused
        assert second.server.pid != pid
        assert (await complete(second, SAY_OK)).message.content.strip()
    finally:
        await second.aclose()


async def test_a_reused_engine_shares_only_the_prompt_a_request_has_in_common_and_answers_as_a_cold_one(
    own_cache: Path, model_path: Path
) -> None:
    rules = " ".join(f"Rule {i}: answer about topic {i} in one word." for i in range(30))
    greedy = ModelSettings(temperature=0, seed=7, max_tokens=24)

    async def ask(instructions: str, keep_alive: float) -> tuple[str, int, bool]:
        client = await EmbeddedClient.start(str(model_path), threads=1, context_window=2048, keep_alive=keep_alive)
        try:
            request = ModelRequest(
                [Message.system(instructions), Message.user("Name the colour of grass.")], settings=greedy
            )
            response = await complete(client, request)
        finally:
            await client.aclose()
        return response.message.content, response.usage.cached_tokens, client.server.reused

    _, cached, reused = await ask("You are terse. " + rules, keep_alive=30)
    assert not reused and cached == 0
    again, cached, reused = await ask("You are terse. " + rules, keep_alive=30)
    assert reused and cached > 200, "the next process does not read the same system prompt again"
    other, cached, reused = await ask("Answer in French. " + rules, keep_alive=30)
    assert reused and cached < 10, "what another process left in the engine serves only a common beginning"
    cold, _, _ = await ask("Answer in French. " + rules, keep_alive=0)
    assert other == cold, "the same answer as an engine of its own, started cold"
    assert again

"""The real engine for integration tests: the embedded llama.cpp server on the bundled 0.5B model.

One server is started for the session (generating on 1 thread, as on CI's 2 cores). A
missing model is a failure, not a skip: these tests are the evidence that the
engine works, and `./scripts/test` installs everything they need.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cortana import Tool, tool
from cortana.config import batch_thread_count
from cortana.models.embedded import READY, resolve_model_path

TEST_MODEL = "qwen2.5-coder-0.5b"
CONTEXT = 4096


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@dataclass(frozen=True)
class Engine:
    url: str
    key: str


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """The embedded engine as Cortana starts it: loopback, no CORS, a random API key handed over on stdin."""
    _, path = resolve_model_path(TEST_MODEL)
    key = secrets.token_urlsafe(16)
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "cortana.models.embedded", "--model", str(path), "--ctx", str(CONTEXT)),
            *("--threads=1", f"--threads-batch={batch_thread_count()}"),  # generating on 1, reading on every core
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    process.stdin.write(key + "\n")
    process.stdin.flush()
    line = process.stdout.readline()
    if not line.startswith(READY):
        process.kill()
        pytest.fail(f"the embedded engine did not start: {line!r}")
    yield Engine(line.split()[1], key)
    process.stdin.close()
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def engine_url(engine: Engine) -> str:
    return engine.url


@pytest.fixture(scope="session")
def engine_key(engine: Engine) -> str:
    return engine.key


def weather_tool(ran: list[str]) -> Tool:
    """A ``get_weather`` tool for the real model, recording the cities it was asked for in ``ran``."""

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city.

        Args:
            city: The city name.
        """
        ran.append(city)
        return f"It is 21 degrees and sunny in {city}."

    return get_weather

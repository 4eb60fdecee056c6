"""The real engine for integration tests: the embedded llama.cpp server on the bundled 0.5B model.

One server is started for the session (1 thread, as on CI's 2 cores). A
missing model is a failure, not a skip: these tests are the evidence that the
engine works, and `./scripts/test` installs everything they need.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from cortana.models.embedded import READY, resolve_model_path

TEST_MODEL = "qwen2.5-coder-0.5b"
CONTEXT = 4096


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def engine_url() -> Iterator[str]:
    _, path = resolve_model_path(TEST_MODEL)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cortana.models.embedded",
            "--model",
            str(path),
            "--ctx",
            str(CONTEXT),
            "--threads",
            "1",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if not line.startswith(READY):
        process.kill()
        pytest.fail(f"the embedded engine did not start: {line!r}")
    yield line.split()[1]
    process.stdin.close()
    process.wait(timeout=30)

"""Xinference as the engine when one machine is not enough: a supervisor and two workers on loopback serving the
bundled 0.5B with two replicas, Cortana's ``engine: openai`` pointed at it (docs/engines.md, "When one machine is
not enough").

Xinference is not one of the project's test dependencies: ``pip install 'xinference[llama-cpp]'`` brings torch and
the CUDA libraries (6.4 GB here), and its cluster takes a minute to start on two cores. These tests run where it is
installed (its ``xinference-supervisor`` on PATH, or ``CORTANA_TEST_XINFERENCE`` naming the folder it is in) and are
skipped, saying so, elsewhere; tests/unit/test_engine_xinference.py covers the same wire format from captures of this
cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.models.embedded import resolve_model_path
from cortana.models.factory import create_model_client
from cortana.models.openai_server import OpenAIServerClient
from tests.integration.test_fix_engine import ROOMS
from tests.unit.test_repair import write

MODEL = "cortana-qwen2.5-coder-0.5b"
STARTS_WITHIN = 180.0


def xinference_bin() -> Path | None:
    """The folder of Xinference's commands, or None when it is not installed."""
    named = os.environ.get("CORTANA_TEST_XINFERENCE")
    found = Path(named) / "xinference-supervisor" if named else shutil.which("xinference-supervisor")
    return Path(found).parent if found and Path(found).is_file() else None


BIN = xinference_bin()
pytestmark = pytest.mark.skipif(
    BIN is None,
    reason="Xinference is not installed (pip install 'xinference[llama-cpp]' in a venv of its own: it brings torch "
    "and CUDA, 6.4 GB, so it is no test dependency); set CORTANA_TEST_XINFERENCE to its bin folder to run these",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Cluster:
    url: str  # the supervisor's API, with /v1
    metrics: list[str]  # each worker's metrics exporter

    def requests_per_replica(self) -> dict[str, int]:
        """Chat requests each replica answered so far (Xinference's ``model_request_total``, per worker)."""
        counts: dict[str, int] = {}
        for url in self.metrics:
            text = httpx.get(url, timeout=10).text
            for line in text.splitlines():
                if line.startswith("xinference:model_request_total{") and f'model_uid="{MODEL}"' in line:
                    replica = re.search(r'replica_index="(\d+)"', line)
                    if replica:
                        counts[replica[1]] = counts.get(replica[1], 0) + int(float(line.rsplit(" ", 1)[1]))
        return counts


def wait_for(check, what: str, seconds: float = STARTS_WITHIN) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"Xinference: {what} within {seconds:.0f} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A supervisor and two workers on 127.0.0.1 (no auth: a private test cluster), the bundled 0.5B registered as a
    custom model and launched with two replicas, one slot (the whole window) and one thread each."""
    assert BIN is not None
    home = tmp_path_factory.mktemp("xinference")
    env = {**os.environ, "XINFERENCE_HOME": str(home), "XINFERENCE_AUTH_ADVANCED": "0"}
    api, supervisor = free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []

    def start(*command: str, log: str) -> None:
        with open(home / log, "wb") as out:
            started.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True))  # fmt: skip

    try:
        start(str(BIN / "xinference-supervisor"), "-H", "127.0.0.1", "-p", str(api), "--supervisor-port",
              str(supervisor), log="supervisor.log")  # fmt: skip
        base = f"http://127.0.0.1:{api}"
        wait_for(lambda: httpx.get(f"{base}/v1/models", timeout=5).status_code == 200, "the supervisor did not answer")
        metrics = []
        for number in (1, 2):
            exporter = free_port()
            start(str(BIN / "xinference-worker"), "-e", base, "-H", "127.0.0.1", "--worker-port", str(free_port()),
                  "-MH", "127.0.0.1", "--metrics-exporter-port", str(exporter), log=f"worker{number}.log")  # fmt: skip
            metrics.append(f"http://127.0.0.1:{exporter}/metrics")

        def workers() -> int:
            nodes = httpx.get(f"{base}/v1/cluster/info", params={"detailed": "true"}, timeout=5).json()
            return sum(1 for node in nodes if node.get("node_type") == "Worker")

        wait_for(lambda: workers() == 2, "two workers did not join")
        _, path = resolve_model_path("qwen2.5-coder-0.5b")
        family = {
            "version": 2, "context_length": 4096, "model_name": MODEL, "model_lang": ["en"],
            "model_ability": ["generate", "chat", "tools"], "model_family": "qwen2.5-coder-instruct",
            "model_specs": [{"model_format": "ggufv2", "model_size_in_billions": "0_5", "quantization": "Q4_K_M",
                             "model_file_name_template": path.name, "model_uri": str(path.parent)}],
        }  # fmt: skip
        registered = httpx.post(
            f"{base}/v1/model_registrations/LLM", json={"model": json.dumps(family), "persist": False}, timeout=60
        )
        assert registered.status_code == 200, registered.text
        launch = {
            "model_uid": MODEL, "model_name": MODEL, "model_type": "LLM", "model_engine": "llama.cpp",
            "model_format": "ggufv2", "model_size_in_billions": "0_5", "quantization": "Q4_K_M", "replica": 2,
            "n_ctx": 4096, "n_parallel": 1, "n_threads": 1, "n_gpu_layers": 0,
        }  # fmt: skip
        launched = httpx.post(f"{base}/v1/models", json=launch, timeout=STARTS_WITHIN)
        assert launched.status_code == 200, launched.text
        yield Cluster(f"{base}/v1", metrics)
    finally:
        for process in reversed(started):  # each in a session of its own: its model processes go with it
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


async def test_cortana_answers_through_xinference_and_spreads_samples_over_its_replicas(cluster: Cluster) -> None:
    client = await create_model_client("openai", base_url=cluster.url, model=MODEL, parallel=2)
    assert isinstance(client, OpenAIServerClient)
    async with client:
        assert client.context_window == 4096, "the n_ctx it was launched with, from its /v1/models"
        question = ModelRequest([Message.user("What is a mutex? One sentence.")], settings=ModelSettings(temperature=0))
        answer = await complete(client, question)
        assert "thread" in answer.message.content.lower() or "lock" in answer.message.content.lower()
        before = cluster.requests_per_replica()
        settings = ModelSettings(temperature=0.8, seed=1, max_tokens=32)
        samples = await client.complete_many(ModelRequest([Message.user("Write a haiku.")], settings=settings), 4)
        after = cluster.requests_per_replica()
    assert len(samples) == 4 and all(sample.message.content for sample in samples)
    served = {replica: after.get(replica, 0) - before.get(replica, 0) for replica in after}
    assert sum(served.values()) == 4 and sorted(served) == ["0", "1"], served
    assert all(count >= 1 for count in served.values()), f"both replicas wrote samples: {served}"


def test_a_fix_through_xinference(cluster: Cluster, tmp_path: Path) -> None:
    """``cortana --yes "fix the failing test"`` with ``engine: openai`` at the cluster and ``parallel: 2``: the
    fix's samples go to both replicas, and the bug one call away is fixed."""
    root = write(tmp_path / "rooms-project", ROOMS)
    (root / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nseed: 1\nparallel: 2\n"
        f"engine: openai\nbase_url: {cluster.url}\nmodel: {MODEL}\n"
    )
    before = cluster.requests_per_replica()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--yes", "--verbose", "fix the failing test"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    after = cluster.requests_per_replica()
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "Applied to rooms/geometry.py." in done.stdout and "+    return width * height" in done.stdout
    assert all(after.get(replica, 0) > before.get(replica, 0) for replica in ("0", "1")), (before, after)

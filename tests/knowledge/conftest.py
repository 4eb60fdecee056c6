"""The knowledge-graph tests run the real graphify CLI on a copy of tests/fixtures/graph_project."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cortana.knowledge.built import BuildRecords
from cortana.knowledge.graphify import find_graphify, graph_json

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "graph_project"


def line_of(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that contains ``text`` first."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} is not in {path}")


@pytest.fixture(scope="session")
def graphify() -> str:
    executable = find_graphify()
    assert executable, "the graphify CLI is missing; the dev extra installs it (pip install -e '.[dev]')"
    return executable


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, graphify: str) -> Path:
    """The fixture project with its graph built once (read it, never change it)."""
    root = tmp_path_factory.mktemp("built") / "project"
    shutil.copytree(FIXTURE, root)
    subprocess.run([graphify, "update", "."], cwd=root, check=True, capture_output=True, timeout=300)
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    """A copy of the built fixture project (graph included) that a test may change."""
    root = tmp_path / "project"
    shutil.copytree(built, root, symlinks=True)
    out = graph_json(root).parent
    BuildRecords(root).remember({"graph": out / "graph.json", "report": out / "GRAPH_REPORT.md"})  # built here
    return root


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """A copy of the fixture project with no graph yet."""
    root = tmp_path / "fresh"
    shutil.copytree(FIXTURE, root)
    return root


def sent_by_cortana(scripted_engine, workspace: Path, home: Path, question: str, reply: str) -> str:  # type: ignore[no-untyped-def]
    """Ask the real ``cortana`` command ``question`` in ``workspace`` (no graph, no recall); the user message sent."""
    import pexpect

    from tests.integration.test_cli_terminal import PROMPT, spawn_on, text_reply

    (workspace / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([reply]))
    child = spawn_on(scripted_engine.url, workspace, home=home)
    child.sendline(question)
    child.expect(reply)
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    (request,) = [r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions"]
    return str(request["messages"][-1]["content"])

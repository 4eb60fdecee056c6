"""The code graph in the ``cortana`` command: built in the background on first use, /graph, doctor, lookups."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pexpect

from tests.integration.test_cli_terminal import PROMPT, spawn_on, text_reply
from tests.knowledge.conftest import FIXTURE


def project_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "shop-project"
    shutil.copytree(FIXTURE, root)
    (root / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  exclude: [vendor/]\n")
    return root


def wait_for_graph(child: pexpect.spawn) -> str:
    """Ask /graph until the background build is done; its answer."""
    for _ in range(120):
        child.sendline("/graph")
        child.expect(r"(building|ready|not built)[^\n]*\n")
        state = child.match.group(0)
        child.expect_exact(PROMPT)
        if state.startswith("ready"):
            return state
        time.sleep(0.5)
    raise AssertionError("the code graph was not built within a minute")


def test_the_graph_is_built_in_the_background_and_feeds_the_turn(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workspace = project_workspace(tmp_path)
    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["build_app calls it."]))
    child = spawn_on(scripted_engine.url, workspace, home=tmp_path)  # the graph is off for the home folder
    assert "Building the code graph of this folder in the background" in child.before
    state = wait_for_graph(child)
    assert "nodes" in state and "communities" in state
    child.sendline("What calls `load_defaults`?")
    child.expect("build_app calls it.")
    child.expect_exact(PROMPT)
    child.sendline("/tools")
    child.expect("code_graph:.*query_knowledge_graph.*update_knowledge_graph")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    (request,) = [r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions"]
    user = request["messages"][-1]["content"]
    assert "load_defaults() — function at shop/registry.py:" in user and "called by: build_app()" in user
    assert "vendor/" in (workspace / ".graphifyignore").read_text()


def test_doctor_names_the_graph_and_how_to_install_graphify(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    workspace = project_workspace(tmp_path)
    command = [sys.executable, "-m", "cortana.cli.main", "doctor", "--engine", "llamacpp"]
    command += ["--base-url", scripted_engine.url]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    found = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    assert "code graph" in found.stdout and "graphify at" in found.stdout
    # the same, with no graphify beside this Python or on PATH: a venv without the graph extra
    bare = tmp_path / "bare-python"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env["PYTHONPATH"] = ":".join(p for p in sys.path if p)
    missing = subprocess.run(
        [str(bare / "python"), *command[1:]], cwd=workspace, env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 0, missing.stderr
    assert "missing graphify: pip install 'cortana[graph]' (or: uv tool install graphifyy)" in missing.stdout

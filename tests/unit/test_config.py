"""cortana.yml: sources and precedence, and errors that name the file, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortana import ConfigError
from cortana.config import load_settings


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    user = tmp_path / "xdg"
    (user / "cortana").mkdir(parents=True)
    workspace = tmp_path / "project"
    workspace.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user))
    return user / "cortana" / "cortana.yml", workspace


def test_defaults_without_files(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    settings = load_settings(workspace, environ={})
    assert settings.engine == "auto" and settings.agent.max_tool_iterations == 10 and settings.sources == []


def test_user_then_workspace_then_environment(homes: tuple[Path, Path]) -> None:
    user, workspace = homes
    user.write_text("engine: ollama\nmodel: qwen2.5-coder:1.5b\nmemory:\n  last_messages: 20\n  recall: false\n")
    (workspace / "cortana.yml").write_text(
        "model: qwen2.5-coder:7b\nmemory:\n  last_messages: 60\npermissions:\n  allow: [write_file]\n"
        "mcp:\n  servers:\n    - name: time\n      command: mcp-server-time\n"
    )
    settings = load_settings(workspace, environ={"OLLAMA_CONTEXT_WINDOW": "16384"})
    assert (settings.engine, settings.model, settings.context_window) == ("ollama", "qwen2.5-coder:7b", 16384)
    assert (settings.memory.last_messages, settings.memory.recall) == (60, False), "sections merge key by key"
    assert settings.permissions.allow == ["write_file"] and settings.mcp.servers[0].name == "time"
    assert settings.sources == [str(user), str(workspace / "cortana.yml"), "$OLLAMA_CONTEXT_WINDOW"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("engine: vllm\n", r"key 'engine': Input should be 'auto', 'ollama', 'docker', 'llamacpp' or 'embedded'"),
        ("context_window: 12\n", r"key 'context_window': Input should be greater than or equal to 256"),
        (
            "agent:\n  max_tool_iteration: 5\n",
            r"key 'agent.max_tool_iteration': Extra inputs are not permitted; remove it",
        ),
        ("memory:\n  working_memory: always\n", r"key 'memory.working_memory'.*'resource', 'thread' or 'off'"),
        ("mcp:\n  servers:\n    - name: x\n", r"key 'mcp.servers.0'.*exactly one of command"),
        ("engine: [a\n", r"is not valid YAML at line 2, column 1"),
        ("- just\n- a list\n", r"must be a mapping"),
    ],
)
def test_a_bad_file_names_the_file_and_the_key(homes: tuple[Path, Path], text: str, expected: str) -> None:
    _, workspace = homes
    (workspace / "cortana.yml").write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_settings(workspace, environ={})
    assert str(info.value).startswith(str(workspace / "cortana.yml"))


def test_a_bad_environment_value_names_the_variable(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    with pytest.raises(ConfigError, match=r"\$CORTANA_THREADS, key 'threads'"):
        load_settings(workspace, environ={"CORTANA_THREADS": "many"})

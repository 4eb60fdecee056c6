"""cortana.yml and the environment: sources, precedence, and errors that name the file or variable and the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cortana import Agent, ConfigError
from cortana.config import (
    Settings,
    compaction_threshold,
    effective_context_window,
    engine_url,
    load_settings,
    ollama_host,
    requested_context_window,
    thread_count,
)
from cortana.testing import ScriptedModel


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
    assert settings.max_tokens == 2048 and settings.agent.named_files == 3 and settings.agent.retry_failed_calls


def test_user_then_workspace_then_environment(homes: tuple[Path, Path]) -> None:
    user, workspace = homes
    user.write_text("engine: ollama\nmodel: qwen2.5-coder:1.5b\nmemory:\n  last_messages: 20\n  recall: false\n")
    (workspace / "cortana.yml").write_text(
        "model: qwen2.5-coder:7b\nmemory:\n  last_messages: 60\npermissions:\n  allow: [write_file]\n"
        "mcp:\n  servers:\n    - name: time\n      command: mcp-server-time\n"
    )
    settings = load_settings(workspace, environ={"OLLAMA_CONTEXT_WINDOW": "16384"}, trust=lambda request: True)
    assert (settings.engine, settings.model, settings.context_window) == ("ollama", "qwen2.5-coder:7b", 16384)
    assert (settings.memory.last_messages, settings.memory.recall) == (60, False), "sections merge key by key"
    assert settings.permissions.allow == ["write_file"] and settings.mcp.servers[0].name == "time"
    assert settings.sources == [str(user), str(workspace / "cortana.yml"), "$OLLAMA_CONTEXT_WINDOW"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "engine: vlm\n",
            r"key 'engine': no engine is called 'vlm'; use one of auto, ollama, docker, llamacpp, embedded, openai, "
            r"or an alias: .*vllm \(openai\)",
        ),
        ("context_window: 12\n", r"key 'context_window': Input should be greater than or equal to 256"),
        ("max_tokens: 4\n", r"key 'max_tokens': Input should be greater than or equal to 16"),
        ("agent:\n  named_files: 99\n", r"key 'agent.named_files': Input should be less than or equal to 10"),
        ("agent:\n  prompt_search: -1\n", r"key 'agent.prompt_search': Input should be greater than or equal to 0"),
        (
            "agent:\n  max_tool_iteration: 5\n",
            r"key 'agent.max_tool_iteration': Extra inputs are not permitted; remove it",
        ),
        ("memory:\n  working_memory: always\n", r"key 'memory.working_memory'.*'resource', 'thread' or 'off'"),
        ("mcp:\n  servers:\n    - name: x\n", r"key 'mcp.servers.0'.*exactly one of command"),
        (
            "heartbeat:\n  active_hours: 8-22\n",
            r"key 'heartbeat.active_hours': must be a range of local times like '08:00-22:00'",
        ),
        ("heartbeat:\n  active_hours: '09:00-09:00'\n", r"key 'heartbeat.active_hours'.*or null for any hour"),
        ("heartbeat:\n  interval_minutes: 0\n", r"key 'heartbeat.interval_minutes': Input should be greater than 0"),
        ("heartbeat:\n  max_unanswered: 0\n", r"key 'heartbeat.max_unanswered': Input should be greater than"),
        (
            "learning:\n  trusted_think: lots\n",
            r"key 'learning.trusted_think': Input should be 'low', 'medium' or 'high'",
        ),
        ("learning:\n  threshold: 2\n", r"key 'learning.threshold': Input should be less than or equal to 1"),
        (
            "learning:\n  prompt_threshold: -2\n",
            r"key 'learning.prompt_threshold': Input should be greater than or equal to -1",
        ),
        ("learning:\n  recipes: 3\n", r"key 'learning.recipes': Extra inputs are not permitted"),
        ("voice:\n  rate: 5\n", r"key 'voice.rate': Input should be greater than or equal to 80"),
        ("voice:\n  voice: 'en; rm -rf'\n", r"key 'voice.voice': String should match pattern"),
        ("fix:\n  samples: 0\n", r"key 'fix.samples': Input should be greater than or equal to 1"),
        ("fix:\n  tries: 3\n", r"key 'fix.tries': Extra inputs are not permitted"),
        ("test: ''\n", r"key 'test': String should have at least 1 character"),
        ("seed: -1\n", r"key 'seed': Input should be greater than or equal to 0"),
        ("engine: [a\n", r"is not valid YAML at line 2, column 1"),
        ("- just\n- a list\n", r"must be a mapping"),
    ],
)
def test_a_bad_file_names_the_file_and_the_key(homes: tuple[Path, Path], text: str, expected: str) -> None:
    refused_naming(homes[1], text, expected)


def refused_naming(workspace: Path, text: str, expected: str) -> None:
    """``text`` as the workspace's cortana.yml is refused with an error that starts with the file and matches
    ``expected`` (the key and the fix)."""
    (workspace / "cortana.yml").write_text(text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_settings(workspace, environ={})
    assert str(info.value).startswith(str(workspace / "cortana.yml"))


def test_a_bad_environment_value_names_the_variable(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    with pytest.raises(ConfigError, match=r"\$CORTANA_THREADS, key 'threads'"):
        load_settings(workspace, environ={"CORTANA_THREADS": "many"})


def test_ollama_context_window_comes_before_ollama_context_length(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    (workspace / "cortana.yml").write_text("context_window: 2048\n")
    both = {"OLLAMA_CONTEXT_LENGTH": "16384", "OLLAMA_CONTEXT_WINDOW": "8192"}
    settings = load_settings(workspace, environ=both)
    assert settings.context_window == 8192 and settings.sources[-1] == "$OLLAMA_CONTEXT_WINDOW"
    assert load_settings(workspace, environ={"OLLAMA_CONTEXT_LENGTH": "16384"}).context_window == 16384
    assert load_settings(workspace, environ={}).context_window == 2048, "the file, when the environment is silent"


def test_the_window_precedence_is_argument_then_environment_capped_at_what_the_engine_serves() -> None:
    env = {"OLLAMA_CONTEXT_WINDOW": "8192", "OLLAMA_CONTEXT_LENGTH": "16384"}
    assert requested_context_window(None, environ={}) is None
    assert requested_context_window(None, environ=env) == 8192
    assert requested_context_window(4096, environ=env) == 4096, "an explicit argument wins"
    assert effective_context_window(None, 32768, environ=env) == 8192
    assert effective_context_window(None, 4096, environ=env) == 4096, "never more than the engine serves"
    assert effective_context_window(None, None, environ=env) == 8192, "the engine cannot tell"
    assert effective_context_window(None, 4096, environ={}) == 4096


@pytest.mark.parametrize("name", ["OLLAMA_CONTEXT_WINDOW", "OLLAMA_CONTEXT_LENGTH"])
@pytest.mark.parametrize("value", ["lots", "100"])
def test_a_bad_window_variable_is_an_error_naming_it(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"environment, key '{name}': must be .*{value}"):
        requested_context_window(None, environ={name: value})


def test_the_threshold_precedence_and_bad_values() -> None:
    assert compaction_threshold(environ={}) == 0.9
    assert compaction_threshold(environ={"CONTEXT_COMPACTION_THRESHOLD": "0.85"}) == 0.85
    assert compaction_threshold(0.5, environ={"CONTEXT_COMPACTION_THRESHOLD": "0.85"}) == 0.5
    for bad in ("lots", "0.05", "2", "nan"):
        with pytest.raises(ConfigError, match=r"key 'CONTEXT_COMPACTION_THRESHOLD': must be a number between 0\.1"):
            compaction_threshold(environ={"CONTEXT_COMPACTION_THRESHOLD": bad})


def test_threads_and_engine_addresses() -> None:
    assert thread_count(3, environ={"CORTANA_THREADS": "2"}) == 3
    assert thread_count(None, environ={"CORTANA_THREADS": "2"}) == 2
    assert thread_count(None, environ={}) >= 1
    with pytest.raises(ConfigError, match="key 'CORTANA_THREADS': must be a whole number, got 'many'"):
        thread_count(None, environ={"CORTANA_THREADS": "many"})
    assert engine_url("docker", environ={"CORTANA_DMR_URL": "http://dmr:1"}) == "http://dmr:1"
    assert engine_url("llamacpp", environ={}) is None
    assert ollama_host(environ={"OLLAMA_HOST": " 0.0.0.0:1234 "}) == "0.0.0.0:1234"


async def test_the_agents_window_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from cortana import Agent, InMemoryHistory, Message, ThreadRef
    from cortana.testing import ScriptedModel

    memory = InMemoryHistory()
    thread = ThreadRef(thread_id="long")
    await memory.append_messages(thread, [Message.user("lorem " * 800), Message.assistant("ok")])
    monkeypatch.setenv("OLLAMA_CONTEXT_WINDOW", "1000")
    explicit = ScriptedModel(["fine"], context_window=100_000)
    result = await Agent(explicit, memory=memory, context_window=100_000).run("hi", thread=thread)
    assert result.metrics.compactions == 0, "Agent(context_window=...) wins over OLLAMA_CONTEXT_WINDOW"
    from_env = ScriptedModel(["summary", "fine"], context_window=100_000)
    result = await Agent(from_env, memory=memory).run("hi", thread=thread)
    assert result.metrics.compactions == 1, "without an argument, the environment's 1,000 tokens apply"
    monkeypatch.setenv("OLLAMA_CONTEXT_WINDOW", "big")
    with pytest.raises(ConfigError, match="OLLAMA_CONTEXT_WINDOW"):
        await Agent(ScriptedModel(["x"], context_window=4096)).run("hi")


def test_every_variable_is_documented() -> None:
    from cortana.config import ENVIRONMENT_VARIABLES

    guide = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    missing = [name for name in ENVIRONMENT_VARIABLES if f"`{name}`" not in guide]
    assert not missing, f"docs/cli.md does not list {missing}"


def test_heartbeat_and_voice_settings(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    (workspace / "cortana.yml").write_text(
        "heartbeat:\n  interval_minutes: 15\n  active_hours: '22:00-06:00'\n  idle_checkin_hours: null\nvoice: true\n"
    )
    settings = load_settings(workspace, environ={})
    beat = settings.heartbeat
    assert (beat.enabled, beat.interval_minutes, beat.active_hours, beat.idle_checkin_hours) == (
        True,
        15,
        "22:00-06:00",
        None,
    )
    assert (beat.max_unanswered, beat.reflect_hours) == (2, 24)
    assert settings.voice.enabled and settings.voice.rate == 175 and settings.agent.local_time


def test_doctor_says_what_the_heartbeat_and_the_voice_will_do(homes: tuple[Path, Path]) -> None:
    from cortana.assistant import heartbeat_checklist
    from cortana.cli.doctor import heartbeat_doctor_line, voice_doctor_line
    from cortana.prompts import prompt_text

    _, workspace = homes
    settings = load_settings(workspace, environ={})
    line = heartbeat_doctor_line(workspace, settings)
    assert line.startswith("every 30 min, active 08:00-22:00, idle check-in after 4 h, reflection every 24 h")
    assert "the shipped checklist" in line and "--no-heartbeat" in line
    assert heartbeat_checklist(workspace) == prompt_text("heartbeat")
    (workspace / "personality").mkdir()
    (workspace / "personality" / "HEARTBEAT.md").write_text("My checklist. Reply HEARTBEAT_OK when nothing is due.")
    assert f"checklist {workspace / 'personality' / 'HEARTBEAT.md'}" in heartbeat_doctor_line(workspace, settings)
    assert heartbeat_checklist(workspace) == "My checklist. Reply HEARTBEAT_OK when nothing is due."
    settings.heartbeat.enabled = False
    assert heartbeat_doctor_line(workspace, settings) == "off (heartbeat.enabled: false in cortana.yml)"
    voice = voice_doctor_line(settings)
    assert voice.startswith("off (/voice on, --voice or voice: true); ") or voice.startswith(
        "missing: install espeak-ng"
    )


def test_a_bare_yaml_off_turns_working_memory_off(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    (workspace / "cortana.yml").write_text("memory:\n  working_memory: off\n")  # YAML reads `off` as false
    assert load_settings(workspace, environ={}).memory.working_memory == "off"


def test_loop_options_are_the_agent_keywords_the_settings_give() -> None:
    settings = Settings.model_validate({"agent": {"max_tool_iterations": 3}, "tools": {"timeout": 7}})
    options = settings.loop_options()
    assert options["max_tool_iterations"] == 3 and options["tool_timeout"] == 7
    agent = Agent(ScriptedModel([]), **options)  # every key is one Agent takes
    assert agent.max_tool_iterations == 3


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[127.0.0.1]:8080", "An IPv4 address cannot be in brackets"),
        ("http://localhost:99999", "Port out of range"),
        ("ftp://127.0.0.1:8080", "not an http or https address"),
        ("http://", "names no host"),
    ],
)
def test_a_bad_base_url_is_a_config_error_naming_the_key_and_the_form(tmp_path: Path, url: str, why: str) -> None:
    """Reported: base_url "http://[127.0.0.1]:8080" stopped cortana with "unexpected ValueError"."""
    (tmp_path / "cortana.yml").write_text(f"base_url: {url!r}\n")
    with pytest.raises(ConfigError, match=rf"key 'base_url': .*{why}.*http://HOST:PORT") as info:
        load_settings(tmp_path, {}, trust=lambda request: True)
    assert info.value.key == "base_url"


async def test_a_bad_base_url_given_to_the_factory_names_the_key() -> None:
    from cortana.models.factory import create_model_client

    with pytest.raises(ConfigError, match=r"key 'base_url': 'http://\[127.0.0.1\]:8080' is not an address"):
        await create_model_client("llamacpp", base_url="http://[127.0.0.1]:8080", settings=Settings())


def test_a_bad_base_url_on_the_command_line_names_the_form(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--base-url", "http://[127.0.0.1]:8080", "doctor"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 2 and "argument --base-url" in done.stderr and "http://HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr

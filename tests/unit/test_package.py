"""The package surface: public API, light imports, the command's --version."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys

import cortana

HEAVY = ("rich", "prompt_toolkit", "ollama", "openai", "httpx", "xllamacpp", "mcp", "yaml", "json_repair")


def test_import_cortana_loads_no_engine_sdk_and_no_terminal_libraries() -> None:
    code = "import sys, json, cortana; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    assert loaded.isdisjoint(HEAVY), f"import cortana pulled in {sorted(loaded & set(HEAVY))}"


def test_all_names_exist_and_are_documented() -> None:
    assert sorted(cortana.__all__) == sorted(set(cortana.__all__))
    for name in cortana.__all__:
        value = getattr(cortana, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"cortana.{name} has no docstring"


def test_lazy_logger_is_reachable_and_unknown_names_fail() -> None:
    assert cortana.AgentLogger.__name__ == "AgentLogger"
    try:
        cortana.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_every_module_has_a_docstring() -> None:
    import pkgutil

    for info in pkgutil.walk_packages(cortana.__path__, "cortana."):
        module = importlib.import_module(info.name)
        assert module.__doc__ and module.__doc__.strip(), f"{info.name} has no module docstring"


def test_cortana_version() -> None:
    out = subprocess.run([sys.executable, "-m", "cortana.cli.main", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"cortana {cortana.__version__}"


def test_help_loads_neither_pydantic_nor_rich() -> None:
    code = (
        "import sys, json\n"
        "from cortana.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    assert loaded.isdisjoint({"pydantic", "rich", "httpx"}), sorted(loaded & {"pydantic", "rich", "httpx"})


AFTER_THE_PROMPT = (
    "cortana.agent.agent",
    "cortana.models.factory",
    "cortana.tools.builtin",
    "cortana.learning.teach",
    "httpx",
    "rich.live",
    "rich.markdown",
)
"""What the interactive session imports only once its prompt is up (issue 16: the prompt in under 0.5 s)."""

AT_THE_PROMPT = """
import json, sys
from prompt_toolkit import PromptSession
from cortana.cli.main import main

async def prompt_async(self, *args, **kwargs):
    print("MODULES", json.dumps(sorted(sys.modules)), flush=True)
    raise EOFError  # leave at once

PromptSession.prompt_async = prompt_async
main(["--engine", "llamacpp", "--base-url", "http://127.0.0.1:9", "--no-heartbeat"])
"""


def test_the_session_shows_its_prompt_before_the_agent_and_the_engines_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """By the modules loaded when the prompt is asked for, not by the clock: the rest loads while the engine does."""
    import pexpect

    env = {"TERM": "dumb", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    child = pexpect.spawn(sys.executable, ["-c", AT_THE_PROMPT], cwd=str(tmp_path), env=env, encoding="utf-8")
    child.expect(r"MODULES (\[.*?\])\r?\n", timeout=60)
    loaded = set(json.loads(child.match[1]))
    child.expect(pexpect.EOF, timeout=60)
    assert "cortana.cli.repl" in loaded, "the prompt was not reached"
    early = sorted(name for name in AFTER_THE_PROMPT if name in loaded)
    assert not early, f"imported before the prompt: {early}"


def test_a_bad_cortana_yml_is_a_one_line_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cortana.yml").write_text("engine: vlm\n")
    out = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "hello"],
        capture_output=True, text=True, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"cortana: {tmp_path / 'cortana.yml'}, key 'engine': no engine is called 'vlm'")


def test_personality_folder_overrides_the_assistant_instructions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cortana.assistant import assistant_instructions
    from cortana.prompts import prompt_text

    assert assistant_instructions(tmp_path) == prompt_text("assistant")
    (tmp_path / "personality").mkdir()
    (tmp_path / "personality" / "assistant.md").write_text("You are Ada, terse and exact.\n")
    assert assistant_instructions(tmp_path) == "You are Ada, terse and exact."

"""The one engine table: every place that names an engine reads it, and the docs show it as it is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortana.cli.main import build_parser
from cortana.config import load_settings
from cortana.engines import ENGINE_NAMES, ENGINES, UnknownEngine, engine_named
from cortana.errors import ConfigError, UserError
from cortana.models.docker import DEFAULT_DMR_URL
from cortana.models.factory import create_model_client
from cortana.models.llamacpp import DEFAULT_LLAMACPP_URL
from cortana.models.ollama import DEFAULT_OLLAMA_URL

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("spelling", "name"),
    [("vLLM", "openai"), ("LM-Studio", "openai"), ("sglang", "openai"), ("llama.cpp", "llamacpp"),
     ("llama-server", "llamacpp"), ("DMR", "docker"), ("Docker Model Runner", "docker"), ("local", "embedded")],
)  # fmt: skip
def test_an_alias_names_its_engine_in_cortana_yml_the_environment_and_the_command_line(
    spelling: str, name: str, tmp_path: Path
) -> None:
    assert engine_named(spelling).name == name
    (tmp_path / "cortana.yml").write_text(f"engine: {spelling}\n")
    assert load_settings(tmp_path, environ={}).engine == name
    assert load_settings(tmp_path / "nowhere", environ={"CORTANA_ENGINE": spelling}).engine == name
    assert build_parser().parse_args(["--engine", spelling]).engine == name


def test_an_unknown_engine_names_the_engines_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UnknownEngine, match="use one of auto, ollama, docker, llamacpp, embedded, openai"):
        engine_named("vlm")
    (tmp_path / "cortana.yml").write_text("engine: vlm\n")
    with pytest.raises(ConfigError, match=r"key 'engine': no engine is called 'vlm'.*vllm \(openai\)"):
        load_settings(tmp_path, environ={})
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--engine", "vlm"])
    assert "argument --engine: no engine is called 'vlm'" in capsys.readouterr().err


async def test_the_factory_reads_the_table() -> None:
    with pytest.raises(UserError, match="Unknown engine: no engine is called 'vlm'"):
        await create_model_client("vlm")
    table = {engine.name: engine for engine in ENGINES}
    assert tuple(table[name].default_url for name in ("ollama", "docker", "llamacpp")) == (
        DEFAULT_OLLAMA_URL,
        DEFAULT_DMR_URL,
        DEFAULT_LLAMACPP_URL,
    )


def test_a_workspace_engine_named_by_an_alias_still_needs_trust_for_another_machine(tmp_path: Path) -> None:
    (tmp_path / "cortana.yml").write_text("engine: vllm\n")
    settings = load_settings(tmp_path, environ={"OPENAI_BASE_URL": "http://10.1.2.3:8000/v1"})
    assert settings.untrusted is not None and "engine" in settings.untrusted.sections
    assert settings.engine == "auto", "an untrusted folder's engine is not used"


def test_the_docs_show_the_table_as_it_is() -> None:
    engines_md = (DOCS / "engines.md").read_text().split("## Names", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| (yes|no) \|$", engines_md, re.M)
    assert [row[0] for row in rows] == list(ENGINE_NAMES)
    for (_, title, aliases, url, variables, probed), engine in zip(rows, ENGINES, strict=True):
        assert title.strip() == engine.title and probed == ("yes" if engine.probed else "no")
        assert re.findall(r"`([^`]+)`", aliases) == list(engine.aliases)
        assert re.findall(r"`([^`]+)`", url) == ([engine.default_url] if engine.default_url else [])
        assert re.findall(r"`([^`]+)`", variables) == list(engine.address_variables)
    cli_md = (DOCS / "cli.md").read_text()
    flag = next(line for line in cli_md.splitlines() if line.startswith("| `--engine "))
    assert flag.split("`")[1].removeprefix("--engine ").replace("\\|", "|").split("|") == list(ENGINE_NAMES)

"""``models:`` a model per role: the turn's (``main``, which is ``model``), the fix's samples' (``sampler``) and its
last round's (``escalate``, which ``fix.last_round`` named before): how cortana.yml says them, merges and trusts
them, and how the fix workflow uses them (scripted models, real tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortana import Assistant
from cortana.config import ModelRole, Settings, load_settings
from cortana.repair import FixStatus, Stronger
from cortana.testing import ScriptedModel
from tests.unit import test_config
from tests.unit.test_config import refused_naming
from tests.unit.test_repair import FIX, ONE_CALL_AWAY, workflow, write

QUIET = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})
homes = test_config.homes  # the fixture: the user's cortana.yml (in a config folder) and a workspace


def test_each_role_is_a_name_or_a_model_on_an_engine_of_its_own(homes: tuple[Path, Path]) -> None:
    user, workspace = homes
    user.write_text(
        "engine: embedded\nmodels:\n  main: qwen2.5-coder-1.5b\n  sampler: qwen2.5-coder-0.5b\n"
        "  escalate:\n    engine: vllm\n    base_url: http://127.0.0.1:9997/v1\n    model: qwen2.5-coder-7b\n"
        "    parallel: 2\n"
    )
    settings = load_settings(workspace, environ={})
    assert (settings.engine, settings.model, settings.models.main) == ("embedded", "qwen2.5-coder-1.5b", None)
    assert settings.models.sampler == ModelRole(model="qwen2.5-coder-0.5b")
    escalate = settings.last_round
    assert (escalate.engine, escalate.model, escalate.parallel) == ("openai", "qwen2.5-coder-7b", 2), "vllm: openai"
    on_its_own = settings.for_role(escalate)
    assert (on_its_own.engine, on_its_own.base_url, on_its_own.model, on_its_own.parallel) == (
        "openai", "http://127.0.0.1:9997/v1", "qwen2.5-coder-7b", 2,
    )  # fmt: skip
    sampler = settings.for_role(settings.models.sampler)  # type: ignore[arg-type]
    assert (sampler.engine, sampler.model, sampler.parallel) == ("embedded", "qwen2.5-coder-0.5b", 1)


def test_main_is_the_model_and_the_environment_still_wins(homes: tuple[Path, Path]) -> None:
    """``models.main`` merges as ``model`` does: a later file's ``model`` wins over an earlier one's ``main``, and
    ``CORTANA_MODEL`` over both."""
    user, workspace = homes
    user.write_text("models:\n  main: mine\n")
    assert load_settings(workspace, environ={}).model == "mine"
    (workspace / "cortana.yml").write_text("model: theirs\n")
    assert load_settings(workspace, environ={}).model == "theirs"
    assert load_settings(workspace, environ={"CORTANA_MODEL": "env"}).model == "env"
    assert Settings(models={"main": "in-code"}).model == "in-code", "settings made in code read it too"


def test_the_older_fix_last_round_is_the_escalate_role(homes: tuple[Path, Path]) -> None:
    user, workspace = homes
    assert load_settings(workspace, environ={}).last_round == ModelRole(model="auto")
    user.write_text("fix:\n  last_round: off\n")
    assert load_settings(workspace, environ={}).last_round == ModelRole(model="off")
    (workspace / "cortana.yml").write_text("models:\n  escalate: qwen2.5-coder-3b\n")
    assert load_settings(workspace, environ={}).last_round.model == "qwen2.5-coder-3b", "the later file wins"
    assert Settings(fix={"last_round": "x"}).last_round.model == "x"
    both = Settings(fix={"last_round": "x"}, models={"escalate": "y"})
    assert both.last_round.model == "y", "in code, models.escalate wins over the older name"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model: a\nmodels:\n  main: b\n", r"key 'models.main': names the turn's model as the top-level `model`"),
        ("engine: ollama\nmodels:\n  main: {engine: openai}\n", r"key 'models.main': names the turn's engine"),
        (
            "fix:\n  last_round: off\nmodels:\n  escalate: qwen2.5-coder-3b\n",
            r"key 'models.escalate': names the last round's model, as fix.last_round does \('off'\): set one",
        ),
        ("models:\n  sampler: auto\n", r"key 'models': models.sampler cannot be 'auto': only models.escalate"),
        ("models:\n  sampler: {}\n", r"key 'models.sampler': names no model: give a model's name, or an engine"),
        ("models:\n  sampler: {engine: vlm}\n", r"key 'models.sampler.engine': no engine is called 'vlm'"),
        ("models:\n  sampler: {engine: openai, base_url: 'ftp://x'}\n", r"key 'models.sampler.base_url': 'ftp://x'"),
        ("models:\n  sampler: {model: m, parallel: 0}\n", r"key 'models.sampler.parallel': Input should be greater"),
        ("models:\n  escalate: {engine: openai, model: auto}\n", r"key 'models.escalate': 'auto' is a choice of the"),
        ("models:\n  drafter: x\n", r"key 'models.drafter': Extra inputs are not permitted; remove it"),
        ("models:\n  sampler: {modle: x}\n", r"key 'models.sampler.modle': Extra inputs are not permitted"),
    ],
)
def test_a_bad_role_names_the_file_the_key_and_the_fix(homes: tuple[Path, Path], text: str, expected: str) -> None:
    refused_naming(homes[1], text, expected)


@pytest.mark.parametrize(
    ("role", "user", "environ", "sensitive"),
    [
        ("qwen2.5-coder-0.5b", "", {}, False),  # a name alone: a model of the engine in use
        ("{engine: openai, base_url: 'http://127.0.0.1:9997/v1'}", "", {}, False),  # this machine
        ("{engine: openai, base_url: 'http://203.0.113.9:9997/v1', model: m}", "", {}, True),
        ("{engine: openai, model: m}", "", {"OPENAI_BASE_URL": "http://203.0.113.9:9997/v1"}, True),
        ("{engine: openai, model: m}", "engine: openai\n", {"OPENAI_BASE_URL": "http://203.0.113.9/v1"}, False),
        (  # the user's own cortana.yml names the same role alike
            "{engine: openai, base_url: 'http://203.0.113.9:9997/v1', model: m}",
            "models:\n  sampler: {engine: openai, base_url: 'http://203.0.113.9:9997/v1', model: m}\n",
            {},
            False,
        ),
    ],
)
def test_a_workspace_role_on_another_machine_needs_trust(
    homes: tuple[Path, Path], role: str, user: str, environ: dict[str, str], sensitive: bool
) -> None:
    user_file, workspace = homes
    user_file.write_text(user)
    (workspace / "cortana.yml").write_text(f"models:\n  sampler: {role}\n")
    settings = load_settings(workspace, environ=environ)
    needs = settings.untrusted is not None and "models.sampler" in settings.untrusted.sections
    assert needs is sensitive
    if sensitive:
        assert settings.models.sampler is None, "untrusted, the folder's role is left out"
        assert settings.untrusted is not None
        assert any(line.startswith("models.sampler: send the fix's prompts") for line in settings.untrusted.describe())
        trusted = load_settings(workspace, environ=environ, trust=lambda request: True)
        assert trusted.models.sampler is not None and trusted.models.sampler.model == "m"


def test_a_workspace_main_on_another_machine_needs_trust_as_base_url_does(homes: tuple[Path, Path]) -> None:
    _, workspace = homes
    (workspace / "cortana.yml").write_text("models:\n  main: {engine: openai, base_url: 'http://203.0.113.9/v1'}\n")
    settings = load_settings(workspace, environ={})
    assert settings.untrusted is not None and list(settings.untrusted.sections) == ["base_url"]
    assert settings.base_url is None, "its address is left out, as a top-level base_url's is"


def test_a_role_on_its_own_server_never_gets_the_turns_key() -> None:
    settings = Settings(engine="openai", base_url="https://a.example/v1", api_key="key-of-a")
    same = settings.for_role(ModelRole(model="other"))
    elsewhere = settings.for_role(ModelRole(engine="openai", base_url="https://b.example/v1", model="m"))
    own = settings.for_role(ModelRole(engine="openai", base_url="https://b.example/v1", api_key="key-of-b"))
    assert (same.base_url, same.api_key) == ("https://a.example/v1", "key-of-a")
    assert (elsewhere.base_url, elsewhere.api_key) == ("https://b.example/v1", None)
    assert own.api_key == "key-of-b"
    other_engine = settings.for_role(ModelRole(engine="ollama", model="qwen2.5-coder:0.5b"))
    assert (other_engine.engine, other_engine.base_url, other_engine.api_key) == ("ollama", None, None)


class Closing(ScriptedModel):
    """A scripted model that records its closing."""

    def __init__(self, *args: object, closed: list[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.closed = closed

    async def aclose(self) -> None:
        self.closed.append(self.model)


async def test_the_sampler_writes_the_samples_and_is_closed_with_the_fix(tmp_path: Path) -> None:
    project = write(tmp_path / "p", ONE_CALL_AWAY)
    closed: list[str] = []
    small = Closing(["no edits here", FIX], model="small", closed=closed)
    main = ScriptedModel([], model="main")

    async def start() -> ScriptedModel:
        return small

    found = workflow(project, main, samples=1, per_location=0, rounds=1, rewrite=False)
    found.sampler = Stronger("small", start)
    progress: list[str] = []
    found.on_progress = lambda step: progress.append(step.message)
    result = await found.run("fix the failing test")
    assert result.status is FixStatus.FIXED, result.message
    assert len(small.requests) == 2 and not main.requests, "every sample is the sampler's"
    assert "the samples are written by small" in progress and closed == ["small"]
    assert result.sampler == "small" and "samples by small" in result.summary()


async def test_the_last_round_takes_over_from_the_sampler(tmp_path: Path) -> None:
    """The sampler writes the rounds before the last; the larger model the last, and the sampler is closed first
    (its memory is the larger model's)."""
    project = write(tmp_path / "p", ONE_CALL_AWAY)
    closed: list[str] = []
    small = Closing(["no edits here"] * 8, model="small", closed=closed)
    larger = Closing([FIX] * 4, model="larger", closed=closed)

    async def sampler() -> ScriptedModel:
        return small

    async def stronger() -> ScriptedModel:
        assert closed == ["small"], "the sampler is closed before the larger model starts"
        return larger

    found = workflow(project, ScriptedModel([], model="main"), samples=1, per_location=0, rounds=2, rewrite=False)
    found.sampler, found.stronger = Stronger("small", sampler), Stronger("larger", stronger)
    result = await found.run("fix the failing test")
    assert result.status is FixStatus.FIXED and result.stronger == "larger", result.message
    assert len(small.requests) == 2 and larger.requests and closed == ["small", "larger"]


async def test_a_sampler_that_does_not_start_leaves_the_samples_to_the_model_in_use(tmp_path: Path) -> None:
    from cortana.errors import EngineUnavailable

    project = write(tmp_path / "p", ONE_CALL_AWAY)

    async def start() -> ScriptedModel:
        raise EngineUnavailable("nothing listening on 127.0.0.1:9997")

    main = ScriptedModel(["no edits here", FIX], model="main")
    found = workflow(project, main, samples=1, per_location=0, rounds=1, rewrite=False)
    found.sampler = Stronger("small", start)
    progress: list[str] = []
    found.on_progress = lambda step: progress.append(step.message)
    result = await found.run("fix the failing test")
    assert result.status is FixStatus.FIXED and result.sampler == "", result.message
    assert "small did not start (nothing listening on 127.0.0.1:9997); the model in use writes the samples" in progress


async def test_the_assistant_gives_the_fix_its_roles(tmp_path: Path) -> None:
    """``models.sampler`` and ``models.escalate`` reach the workflow, named; nothing starts until the fix needs it;
    a sampler that is the model in use is no sampler."""
    cases = [
        ({}, None, None),
        ({"sampler": "qwen2.5-coder-0.5b"}, "qwen2.5-coder-0.5b", None),
        ({"sampler": "scripted"}, None, None),
        ({"escalate": "qwen2.5-coder-3b"}, None, "qwen2.5-coder-3b"),
        (
            {"sampler": {"engine": "openai", "base_url": "http://127.0.0.1:9997/v1", "model": "m", "parallel": 2}},
            "m on openai at http://127.0.0.1:9997/v1",
            None,
        ),
    ]
    for models, sampler, escalate in cases:
        settings = QUIET.model_copy(update={"models": QUIET.models.model_validate(models)})
        async with Assistant(tmp_path, settings, client=ScriptedModel(), heartbeat=False) as assistant:
            found = await assistant.fix_workflow()
        assert (found.sampler.name if found.sampler else None) == sampler, models
        assert (found.stronger.name if found.stronger else None) == escalate, models


def test_doctor_says_which_models_a_fix_uses() -> None:
    from cortana.cli.doctor import fix_models_doctor_line

    assert fix_models_doctor_line(Settings()) == (
        "samples by the model in use; last round: auto (a larger installed model, when one fits)"
    )
    roles = Settings(
        engine="embedded",
        models={
            "sampler": "qwen2.5-coder-0.5b",
            "escalate": {"engine": "openai", "base_url": "http://10.0.0.1:9997/v1"},
        },
    )
    assert fix_models_doctor_line(roles) == (
        "samples by qwen2.5-coder-0.5b; last round: its first model on openai at http://10.0.0.1:9997/v1"
    )
    assert fix_models_doctor_line(Settings(fix={"last_round": False})).endswith("last round: off")

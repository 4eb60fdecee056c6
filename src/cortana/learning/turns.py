"""What :class:`~cortana.learning.experience.Experience` does in a turn, as parts it needs no store for.

Experience is a plain turn extension (``Agent(experience=e)`` or ``extensions=[..., e]``):

    context(thread, prompt)   a correction of the previous answer? rate it bad;
                              embed the prompt, show the best recipes over the threshold
    turn_settings             a trusted recipe (good twice) lowers thinking to trusted_think
    after_turn(result)        record the run; 3+ tool calls: distill once no turn runs,
                              giving the engine back whenever a turn starts

This module holds what those steps share and do without the recipe file: what
a turn showed (:class:`Shown`), the thinking a trusted recipe allows
(:func:`lower_think`), the block of recipes for the prompt
(:func:`recipes_block`), and the one model call that distills a run into a
recipe (:func:`distill_recipe`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cortana.learning.recipes import (
    Recipe,
    changed_files,
    distill_prompt,
    fingerprint,
    parse_recipe,
    relied_on,
    render_recipe,
)
from cortana.messages import Message, RunResult
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, ThinkLevel, complete
from cortana.prompts import prompt_text

__all__ = [
    "CORRECTION_WINDOW_S",
    "DISTILL_MAX_TOKENS",
    "IDLE_POLL_S",
    "MAX_DISTILL_TRIES",
    "Shown",
    "distill_recipe",
    "lower_think",
    "recipes_block",
]

CORRECTION_WINDOW_S = 15 * 60
"""A prompt that starts like a correction rates the previous answer bad only this soon after it."""
IDLE_POLL_S = 0.1
"""How often distilling looks whether a turn started (and gives the engine back to it)."""
MAX_DISTILL_TRIES = 5
"""How often distilling gives the engine back to a new turn and starts again before it gives up."""
DISTILL_MAX_TOKENS = 400
_LEVELS = ["low", "medium", "high"]


@dataclass(slots=True)
class Shown:
    """What a turn's context showed, kept until the turn's ``after_turn``."""

    prompt: str
    embedding: list[float] | None
    recipes: list[tuple[int, float]]
    trusted: bool
    think: str | None = None


def lower_think(shown: Shown | None, level: ThinkLevel | None, settings: ModelSettings) -> ModelSettings:
    """``settings`` with thinking lowered to ``level`` when the turn shows a trusted recipe (noted on ``shown``)."""
    if shown is None or not shown.trusted or level is None or settings.think is False:
        return settings
    if isinstance(settings.think, str) and _LEVELS.index(settings.think) <= _LEVELS.index(level):
        return settings  # already thinking as little
    shown.think = level
    return replace(settings, think=level)


async def recipes_block(recipes: Sequence[Recipe], workspace: Path) -> str:
    """The ``<context>`` block of the recipes a prompt matched, each with the files it relies on that changed."""
    blocks = [prompt_text("recipe_context")]
    for recipe in recipes:
        changed = await asyncio.to_thread(changed_files, workspace, recipe.files)
        blocks.append(render_recipe(recipe, changed))
    return "\n\n".join(blocks)


async def distill_recipe(client: ModelClient, result: RunResult, workspace: Path) -> Recipe:
    """One model call that turns the run's trace into a recipe, with the fingerprints of the files it relied on."""
    # A recipe needs no reasoning; but Ollama answers HTTP 400 to `think` for a model that cannot think.
    think = False if client.supports_thinking else None
    request = ModelRequest(
        messages=[Message.user(distill_prompt(result))],
        settings=ModelSettings(temperature=0.0, max_tokens=DISTILL_MAX_TOKENS, think=think),
    )
    reply = await complete(client, request)
    recipe = parse_recipe(reply.message.content, result)
    paths = await asyncio.to_thread(relied_on, result, workspace)
    prints = [p for p in [await asyncio.to_thread(fingerprint, workspace, path) for path in paths] if p]
    return replace(recipe, files=tuple(prints))

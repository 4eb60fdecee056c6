"""One message cut to what the engine's window takes: its head and tail, with a line where the middle was.

Every run fits its user message at its start (``Run.start``; the run's stream says so with a ``PromptCut``): a
message the engine cannot fit is refused after a long read, and on a small machine even one that fits takes minutes
to read.
"""

from __future__ import annotations

from cortana.agent.compaction import CHARS_PER_TOKEN, measure
from cortana.messages import Message
from cortana.models.base import ModelClient

__all__ = ["PROMPT_SHARE", "fit_prompt"]

PROMPT_SHARE = 0.5
"""The most of the engine's window one message may take (the instructions, the tools, the history and the answer
need the rest)."""
MOST_TOKENS_PER_CHAR = 4
"""No text takes more tokens than this per character (an emoji: 3 or 4): a shorter message is never measured."""
DEFAULT_WINDOW = 8192


async def fit_prompt(prompt: str, client: ModelClient, window: int | None) -> tuple[str, str | None]:
    """``prompt`` cut to what the window can take (its head and tail, with a line where the middle was), and a note
    for the user when it was cut.

    A message the engine cannot fit is refused after a long read, and on a small machine even one that fits takes
    minutes to read (10 MB piped in gave no answer within 60 s); a pasted log is mostly read for its start and end.
    """
    budget = int((window or DEFAULT_WINDOW) * PROMPT_SHARE)
    if len(prompt) * MOST_TOKENS_PER_CHAR <= budget:
        return prompt, None
    limit = min(len(prompt), int(budget * CHARS_PER_TOKEN))
    text = _cut(prompt, limit)
    for _ in range(4):  # the engine's count, shrinking the cut in proportion until it fits
        tokens = await measure(client, [Message.user(text)], [])
        if tokens <= budget:
            break
        limit = int(limit * budget / tokens * 0.95)
        text = _cut(prompt, limit)
    if text == prompt:
        return prompt, None
    note = (
        f"cortana: your message has {len(prompt):,} characters, more than the model's window takes; its first and "
        f"last {limit:,} characters are sent and {len(prompt) - limit:,} in the middle are left out"
    )
    return text, note


def _cut(prompt: str, limit: int) -> str:
    if len(prompt) <= limit:
        return prompt
    head = limit * 2 // 3
    tail = limit - head
    gap = f"[... {len(prompt) - head - tail:,} characters left out: the message is longer than the model's window ...]"
    return f"{prompt[:head]}\n{gap}\n{prompt[-tail:]}"

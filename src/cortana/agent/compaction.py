"""Context compaction: keep a long conversation inside the engine's context window.

Before each model call the agent measures the prompt (the engine's tokenizer
when it has one, else a conservative estimate). At ``threshold`` x the
effective window, the same model writes a continuation summary of the older
messages (objective, constraints, decisions, paths, tool findings, test
results, failures, remaining work) that replaces them; the newest messages,
the current turn's included, are always kept. If the summary call fails, a
bounded local fallback keeps the most recent transcript that fits, with a
note that older messages were dropped. The summary is stored, so the next
load starts from it; the replaced messages stay in the memory file for recall.
Compaction is off when the window is unknown.

The window and the threshold come from ``cortana.config``
(``effective_context_window``, ``compaction_threshold``), where their one
precedence order is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cortana.errors import CortanaError
from cortana.messages import IMAGE_TOKENS, Message
from cortana.models.base import ModelClient, ModelRequest, ModelSettings, ToolSpec, complete
from cortana.prompts import prompt_text

__all__ = ["Compaction", "compact", "estimate_tokens", "measure", "summarize"]

SUMMARY_NAME = "summary"
CHARS_PER_TOKEN = 3.5
"""A first guess of characters per token for prose and code (Qwen's tokenizer: about 4 for English, code and JSON
fewer), for engines without a tokenizer endpoint; the engine's tokenizer has the last word where it has one."""


def estimate_tokens(messages: list[Message], tools: list[ToolSpec]) -> int:
    """A conservative token count for engines without a tokenizer endpoint; an image counts as ``IMAGE_TOKENS``."""
    text = "".join(m.content + (m.thinking or "") + json.dumps([c.arguments for c in m.tool_calls]) for m in messages)
    text += json.dumps([t.as_function() for t in tools])
    images = sum(len(m.images) for m in messages)
    return int(len(text) / CHARS_PER_TOKEN) + 4 * len(messages) + IMAGE_TOKENS * images


async def measure(client: ModelClient, messages: list[Message], tools: list[ToolSpec]) -> int:
    """The prompt's size in tokens: the engine's tokenizer when it has one (and it answers), else an estimate."""
    if client.supports_token_counting:
        try:
            return await client.count_tokens(messages, tools)
        except CortanaError:
            pass  # the tokenizer endpoint failed; the estimate is conservative
    return estimate_tokens(messages, tools)


@dataclass
class Compaction:
    """The result of compacting: the new transcript and what happened."""

    messages: list[Message]
    summary: Message
    kept: int
    fallback: bool


def split_point(messages: list[Message], keep_from: int) -> int:
    """Move a cut so it never falls between an assistant's tool calls and their results."""
    while keep_from < len(messages) and messages[keep_from].role == "tool":
        keep_from += 1
    return keep_from


async def summarize(
    client: ModelClient, older: list[Message], focus: str | None, settings: ModelSettings | None = None
) -> str:
    """The same model's continuation summary of ``older`` (raises if the call fails or says nothing)."""
    instructions = prompt_text("compaction")
    if focus:
        instructions += "\n\n" + prompt_text("compaction_focus").format(focus=focus)
    request = ModelRequest(
        messages=[Message.system(instructions), Message.user(render_transcript(older))],
        settings=settings or ModelSettings(temperature=0),
    )
    response = await complete(client, request)
    summary = response.message.content.strip()
    if not summary:
        raise CortanaError("the summary came back empty")
    return summary


def render_transcript(messages: list[Message]) -> str:
    """Messages as plain text for the summarizer."""
    lines = []
    for message in messages:
        if message.role == "tool":
            lines.append(f"[tool result of {message.name}]\n{message.content}")
        elif message.tool_calls:
            calls = ", ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in message.tool_calls)
            lines.append(f"[assistant calls] {calls}" + (f"\n{message.content}" if message.content else ""))
        else:
            shown = "".join(f"\n[image: {image.label}]" for image in message.images)  # the summary names what was shown
            lines.append(f"[{message.name or message.role}]\n{message.content}{shown}")
    return "\n\n".join(lines)


def local_fallback(older: list[Message], budget_tokens: int) -> str:
    """Without a model summary: the most recent part of ``older`` that fits ``budget_tokens``, as text."""
    kept: list[str] = []
    used = 0
    for message in reversed(older):
        text = render_transcript([message])
        cost = int(len(text) / CHARS_PER_TOKEN) + 4
        if used + cost > budget_tokens:
            break
        kept.append(text)
        used += cost
    dropped = len(older) - len(kept)
    note = f"(The summary could not be written; {dropped} older messages were left out. The latest ones follow.)"
    return "\n\n".join([note, *reversed(kept)])


async def compact(
    client: ModelClient,
    messages: list[Message],
    *,
    keep_from: int,
    window: int,
    focus: str | None = None,
) -> Compaction:
    """Replace ``messages[1 or 0 : keep_from]`` (after the system prompt) with a summary.

    ``keep_from`` is the index of the first message that must stay (the
    current turn, or the most recent messages).
    """
    start = 1 if messages and messages[0].role == "system" else 0
    keep_from = split_point(messages, keep_from)
    older, kept = messages[start:keep_from], messages[keep_from:]
    fallback = False
    try:
        text = await summarize(client, older, focus)
    except Exception:  # the engine failed or said nothing: fall back locally, never lose the turn
        text = local_fallback(older, budget_tokens=max(window // 5, 256))
        fallback = True
    summary = Message(role="user", name=SUMMARY_NAME, content=f"Summary of the earlier conversation:\n\n{text}")
    return Compaction(messages=[*messages[:start], summary, *kept], summary=summary, kept=len(kept), fallback=fallback)

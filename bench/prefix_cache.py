"""Prompt-cache reuse over a 10-turn session on the real embedded engine.

The session uses everything that changes a prompt between turns: working
memory (the model may update it), semantic recall, and a per-turn line (the
local time) that changes every turn. For every model call it prints the
prompt tokens, the tokens llama.cpp served from its cache, the tokens that
were new since the previous call (the previous answer and the new message),
and the tokens re-processed beyond those. The goal: from turn 2 on,
re-processed tokens stay within 5% of the new tokens.

``--via extension`` gives the time line through a ``TurnExtension`` instead of
the ``context=`` argument: the same bytes must reach the engine, so the
numbers must not change. ``--via local_time`` uses the companion's own
``LocalTime`` extension (the time and the time away, read from memory, as the
``cortana`` command sends them), on a clock moving 47 minutes a turn.

    python bench/prefix_cache.py [--model qwen2.5-coder-0.5b] [--turns 10] [--via context|extension|local_time]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cortana import Agent, LocalTime, ModelCallFinished, RunFinished, TurnExtension
from cortana.companion import ManualClock
from cortana.memory.recall import E5Embedder, Recall
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef
from cortana.models.base import ModelSettings
from cortana.models.factory import create_model_client
from report import save

PROMPTS = [
    "Hi! I'm Maya and I'm planning a trip to Lisbon in May.",
    "I'd like to stay somewhere near the Alfama district.",
    "What's a good day trip from Lisbon?",
    "My budget for the hotel is about 120 euros a night.",
    "Remind me, which district did I want to stay in?",
    "I also love seafood. Any dishes I should try?",
    "How do I get from the airport to the city centre?",
    "What is my name, and where am I going?",
    "Suggest a plan for my first evening.",
    "Summarize my trip preferences in two sentences.",
]


CHECKS = {5: ("alfama",), 8: ("maya", "lisbon")}
"""Words the answers of these turns must hold: a broken assistant must not produce a good-looking cache figure."""


def answer_problems(outputs: dict[int, str]) -> list[str]:
    """What is wrong with the session's answers: a checked turn missing its words, or an answer repeating
    the previous answer or the turn's own message word for word."""
    problems = []
    for turn, words in CHECKS.items():
        text = outputs.get(turn, "").lower()
        missing = [word for word in words if word not in text]
        if turn in outputs and missing:
            problems.append(f"turn {turn} does not name {', '.join(missing)}: {outputs[turn][:80]!r}")
    for turn, text in outputs.items():
        if turn > 1 and text.strip() and text.strip() == outputs.get(turn - 1, "").strip():
            problems.append(f"turn {turn} repeats turn {turn - 1}'s answer")
        if text.strip() == PROMPTS[turn - 1].strip():
            problems.append(f"turn {turn} echoes the user's message")
    return problems


def time_line(turn: int) -> str:
    return f"Local time: 2026-05-0{1 + turn % 9} 1{turn % 10}:00"


class Clock(TurnExtension):
    """The time line as an extension's context block."""

    name = "clock"

    def __init__(self) -> None:
        self.turn = 0

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        self.turn += 1
        return time_line(self.turn)


async def session(
    model: str, turns: int, threads: int, via: str, outputs: dict[int, str]
) -> list[dict[str, float | int]]:
    client = await create_model_client("embedded", model=model, threads=threads, context_window=8192)
    rows: list[dict[str, float | int]] = []
    with tempfile.TemporaryDirectory() as folder:
        memory = SQLiteMemory(Path(folder) / "memory.db", recall=Recall(E5Embedder(), top_k=2))
        clock = ManualClock(datetime(2026, 5, 1, 9, 0, tzinfo=timezone(timedelta(hours=1))))
        extensions: dict[str, list[TurnExtension]] = {
            "extension": [Clock()],
            "local_time": [LocalTime(memory, clock=clock)],
        }
        agent = Agent(
            client,
            instructions="You are a helpful travel assistant. Answer in at most three sentences.",
            memory=memory,
            extensions=extensions.get(via, []),
            settings=ModelSettings(temperature=0, seed=1, max_tokens=120),
        )
        thread = ThreadRef(resource_id="maya", thread_id="lisbon")
        previous_total = 0
        try:
            for turn, prompt in enumerate(PROMPTS[:turns], start=1):
                context = time_line(turn) if via == "context" else None
                await clock.advance(47 * 60)
                async for event in agent.run_stream(prompt, thread=thread, context=context):
                    if isinstance(event, ModelCallFinished):
                        usage = event.response.usage
                        new = max(usage.prompt_tokens - previous_total, 0) if previous_total else usage.prompt_tokens
                        processed = usage.prompt_tokens - usage.cached_tokens
                        rows.append(
                            {
                                "turn": turn,
                                "prompt_tokens": usage.prompt_tokens,
                                "cached_tokens": usage.cached_tokens,
                                "new_tokens": new,
                                "processed_tokens": processed,
                                "reprocessed_beyond_new": max(processed - new, 0),
                                "seconds": round(event.duration, 2),
                            }
                        )
                        previous_total = usage.prompt_tokens + usage.completion_tokens
                    elif isinstance(event, RunFinished):
                        outputs[turn] = event.result.output
                        print(f"turn {turn}: {event.result.output[:90]!r}", file=sys.stderr)
        finally:
            memory.close()
            await client.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--via", choices=["context", "extension", "local_time"], default="context")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "prefix_cache.json")
    args = parser.parse_args()
    outputs: dict[int, str] = {}
    rows = asyncio.run(session(args.model, args.turns, args.threads, args.via, outputs))
    header = f"{'turn':>4} {'prompt':>7} {'cached':>7} {'new':>6} {'processed':>9} {'beyond new':>10} {'s':>6}"
    print(header)
    for row in rows:
        print(
            f"{row['turn']:>4} {row['prompt_tokens']:>7} {row['cached_tokens']:>7} {row['new_tokens']:>6} "
            f"{row['processed_tokens']:>9} {row['reprocessed_beyond_new']:>10} {row['seconds']:>6}"
        )
    later = [row for row in rows if int(row["turn"]) >= 2]
    new = sum(int(row["new_tokens"]) for row in later)
    beyond = sum(int(row["reprocessed_beyond_new"]) for row in later)
    share = beyond / new if new else 0.0
    print(f"turns 2+: {beyond} tokens re-processed beyond {new} new ({share:.1%}; goal <= 5%)")
    problems = answer_problems(outputs)
    verdict = "; ".join(problems) if problems else "turn 5 names Alfama, turn 8 Maya and Lisbon; no repeats"
    print(f"answers: {verdict}")
    report = {
        "model": args.model,
        "time_line_via": args.via,
        "calls": rows,
        "turns_2_plus": {"new": new, "reprocessed_beyond_new": beyond, "share": share},
        "answers": outputs,
        "answer_problems": problems,
    }
    save(args.json, report)
    if problems:
        sys.exit("the answers are wrong, so the cache figure above is not evidence of a working assistant")


if __name__ == "__main__":
    main()

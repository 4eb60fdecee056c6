"""Working memory on the bundled models: ten multi-turn conversations, checked turn by turn.

Each conversation tells the assistant a few facts and later asks for them
back. With working memory on (the default of ``SQLiteMemory``), a turn fails
when the model loops (calls ``update_working_memory`` more than once, or
runs out of tool rounds), echoes the user's message or its own previous
answer, answers nothing, or, on a checked turn, misses the facts asked for.

    python bench/conversations.py [--model qwen2.5-coder-0.5b] [--working-memory on|off] [--threads 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cortana import Agent, MaxToolIterationsError
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import ThreadRef
from cortana.models.base import ModelSettings
from cortana.models.factory import create_model_client
from report import RESULTS, save

# (message, words the answer must hold, all of them; empty: not checked)
CONVERSATIONS: list[list[tuple[str, tuple[str, ...]]]] = [
    [
        ("Hi, I'm Priya. I'm learning to bake sourdough bread.", ()),
        ("My starter is called Bubbles and lives in the fridge.", ()),
        ("How often should I feed a starter kept in the fridge?", ()),
        ("What is my starter called?", ("bubbles",)),
    ],
    [
        ("I have a dog named Pixel, a two-year-old beagle.", ()),
        ("He gets anxious during thunderstorms.", ()),
        ("Any tips for calming him down?", ()),
        ("What breed is my dog, and what's his name?", ("beagle", "pixel")),
    ],
    [
        ("My daughter's birthday is on June 14th and she turns eight.", ()),
        ("She loves dinosaurs and the colour green.", ()),
        ("Suggest a theme for her party.", ()),
        ("When is her birthday?", ("june", "14")),
    ],
    [
        ("I'm Tomás and I work as a nurse on night shifts.", ()),
        ("I usually sleep from 9 in the morning until 4 in the afternoon.", ()),
        ("What should I eat before a night shift?", ()),
        ("What is my job?", ("nurse",)),
    ],
    [
        ("I'm moving from Oslo to Barcelona next month.", ()),
        ("I don't speak Spanish yet, only Norwegian and English.", ()),
        ("What documents do people usually need when moving within Europe?", ()),
        ("Which city am I moving to?", ("barcelona",)),
    ],
    [
        ("I'm training for a half marathon in October.", ()),
        ("My current long run is 12 kilometres.", ()),
        ("How should I increase my distance each week?", ()),
        ("How long is my current long run?", ("12",)),
    ],
    [
        ("My favourite author is Ursula K. Le Guin.", ()),
        ("I just finished The Dispossessed.", ()),
        ("Recommend another book I might like.", ()),
        ("Which book did I just finish?", ("dispossessed",)),
    ],
    [
        ("Call me Sam. I'm allergic to peanuts.", ()),
        ("I'm cooking dinner for four friends on Saturday.", ()),
        ("Suggest a main course.", ()),
        ("What am I allergic to?", ("peanut",)),
    ],
    [
        ("I keep bees: three hives in my garden in Devon.", ()),
        ("One hive was quite aggressive last week.", ()),
        ("What could make a hive aggressive?", ()),
        ("How many hives do I have?", ("three",)),
    ],
    [
        ("I'm Lena and I play the cello in a community orchestra.", ()),
        ("Our next concert is Dvořák's New World Symphony.", ()),
        ("How can I practise a difficult passage efficiently?", ()),
        ("Which instrument do I play?", ("cello",)),
    ],
]
ALTERNATIVES = {"three": ("three", "3"), "14": ("14",), "12": ("12",)}


def turn_problems(prompt: str, output: str, previous: str, words: tuple[str, ...], notes: int) -> list[str]:
    problems = []
    text = output.strip()
    if not text or text.startswith("(The model gave no answer"):
        problems.append("no answer")
    if notes > 1:
        problems.append(f"update_working_memory called {notes} times")
    if text and text == prompt.strip():
        problems.append("echoes the message")
    if text and text == previous.strip():
        problems.append("repeats the previous answer")
    lowered = text.lower()
    missing = [w for w in words if not any(alt in lowered for alt in ALTERNATIVES.get(w, (w,)))]
    if missing:
        problems.append(f"does not say {', '.join(missing)}")
    return problems


async def run(model: str, working_memory: bool, threads: int) -> dict[str, Any]:
    client = await create_model_client("embedded", model=model, threads=threads, context_window=8192)
    turns: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for number, conversation in enumerate(CONVERSATIONS, start=1):
                memory = SQLiteMemory(
                    Path(folder) / f"{number}.db", working_memory="resource" if working_memory else None
                )
                agent = Agent(
                    client,
                    instructions="You are a friendly assistant. Answer in at most three sentences.",
                    memory=memory,
                    settings=ModelSettings(temperature=0, seed=1, max_tokens=120),
                    max_tool_iterations=4,
                )
                thread = ThreadRef(resource_id=f"user{number}", thread_id="chat")
                previous = ""
                for prompt, words in conversation:
                    started = time.perf_counter()
                    try:
                        result = await agent.run(prompt, thread=thread)
                        output = result.output
                        notes = sum(
                            call.name == "update_working_memory" for m in result.new_messages for call in m.tool_calls
                        )
                        problems = turn_problems(prompt, output, previous, words, notes)
                    except MaxToolIterationsError:
                        output, notes, problems = "", 0, ["ran out of tool rounds"]
                    turns.append(
                        {
                            "conversation": number,
                            "prompt": prompt,
                            "output": output,
                            "notes": notes,
                            "problems": problems,
                            "seconds": round(time.perf_counter() - started, 1),
                        }
                    )
                    print(f"{number} {'OK ' if not problems else 'BAD'} {output[:80]!r} {problems}", file=sys.stderr)
                    previous = output
                memory.close()
    finally:
        await client.aclose()
    checked = [t for t, (_, words) in zip(turns, [pair for c in CONVERSATIONS for pair in c], strict=True) if words]
    return {
        "model": model,
        "working_memory": working_memory,
        "turns": len(turns),
        "turns_with_problems": sum(bool(t["problems"]) for t in turns),
        "loops": sum(any("called" in p or "rounds" in p for p in t["problems"]) for t in turns),
        "echoes_or_repeats": sum(any("echoes" in p or "repeats" in p for p in t["problems"]) for t in turns),
        "empty": sum("no answer" in t["problems"] for t in turns),
        "facts_recalled": f"{sum(not any('does not say' in p for p in t['problems']) for t in checked)}/{len(checked)}",
        "notes_taken": sum(t["notes"] for t in turns),
        "seconds": round(sum(t["seconds"] for t in turns), 1),
        "log": turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--working-memory", choices=["on", "off"], default="on")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(run(args.model, args.working_memory == "on", args.threads))
    summary = {k: v for k, v in result.items() if k != "log"}
    print(summary)
    path = args.json or RESULTS / f"conversations_{args.model}_{args.working_memory}.json"
    save(path, result)


if __name__ == "__main__":
    main()

"""Heartbeat check-ins on the real embedded engine, with the shipped checklist (prompts/heartbeat.md).

Two kinds of beat, 20 scenarios each, every one a fresh workspace with its own
working memory, a short earlier conversation and a local time:

- ``quiet``: nothing is due (a reminder for tomorrow, one already done, an
  empty memory...). A good check-in replies just HEARTBEAT_OK, which is dropped.
  Scored: the share of replies dropped.
- ``due``: a reminder, appointment or promised follow-up is due now or within
  the hour. A good check-in says so. Scored: the share of replies that are
  not dropped and name the item (one of its words).

The check-in runs as the ``cortana`` command runs it: the assistant's
instructions and built-in tools, the workspace's memory, ``companion_check_in``
(the local time, the "Due soon" list, unattended, not remembered unless it
speaks).

The development set is 320 scenarios: the 40 in this file, written by the same
hand as ``companion/due.py``; ``bench/heartbeat_set/dev_2.json``, written by a
separate session as a held-out set and scored once as one (1.5B model: quiet
18/20, due 13/20), its misses then studied and the time parser extended; and
``bench/heartbeat_set/held_out.json``, written after that by another separate
session that saw neither the code nor the other sets, scored once as the
held-out set (1.5B: quiet 17/20, due 15/20), its misses then studied in turn;
``bench/heartbeat_set/held_out_3.json`` to ``held_out_7.json``, written the same
way by a third to a seventh session, each scored once as the held-out set (1.5B:
quiet 17/20, due 16/20; 17/20, 19/20; 17/20, 16/20; 16/20, 14/20; 17/20,
13/20) and then studied. The held-out sets now are ``held_out_8.json`` and
``held_out_9.json`` (``HELD_OUT``), written the same way after the parser's last
change and each scored once with it; no rule is chosen on them.

    python bench/heartbeat_eval.py [--model qwen2.5-coder-1.5b] [--split dev|held-out] [--only ID,...]
    python bench/heartbeat_eval.py --split held-out --sets held_out_9   # one set
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cortana import Agent, ThreadRef
from cortana.assistant import assistant_instructions, heartbeat_checklist
from cortana.companion import ManualClock, companion_check_in, is_heartbeat_ok
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import Message
from cortana.models.base import ModelSettings
from cortana.models.factory import create_model_client
from cortana.tools.builtin import builtin_tools, workspace_gate
from report import save

RESULTS = Path(__file__).resolve().parent / "results"
SETS = Path(__file__).resolve().parent / "heartbeat_set"
ZONE = timezone(timedelta(hours=1))
SPLITS = ("dev", "held-out")
HELD_OUT = ("held_out_8", "held_out_9")
"""Sets written blind after the time parser's last change, each scored once with it: no rule is chosen on them."""


@dataclass(frozen=True)
class Scenario:
    id: str
    kind: str  # "quiet" or "due"
    now: str  # local time, "YYYY-MM-DD HH:MM" (2026-12-01 is a Tuesday)
    memory: str  # working memory
    chat: tuple[tuple[str, str], ...] = ()  # earlier (user, assistant) exchanges
    words: tuple[str, ...] = ()  # for "due": a reply that names the item holds one of these
    split: str = "dev"
    source: str = "builtin"  # the set it comes from: "builtin" (this file) or a file of bench/heartbeat_set/


S = Scenario
SCENARIOS = [
    # -- nothing due -----------------------------------------------------------------------------
    S("empty-memory", "quiet", "2026-12-01 10:00", ""),
    S("name-only", "quiet", "2026-12-01 11:30", "- The user's name is Ana.\n- Ana is a backend developer."),
    S("dentist-friday", "quiet", "2026-12-01 09:00", "- Dentist appointment on Friday 4 December at 10:00."),
    S("call-done", "quiet", "2026-12-01 15:20", "- Reminder: call Sam at 15:00 (done, the user called at 14:55)."),
    S(
        "birthday-next-week",
        "quiet",
        "2026-12-01 18:00",
        "- Mum's birthday is on 9 December; buy a present by the 7th.",
    ),
    S("tomorrow-standup", "quiet", "2026-12-01 16:00", "- Stand-up meeting tomorrow (Wednesday) at 09:30."),
    S(
        "python-chat",
        "quiet",
        "2026-12-01 14:00",
        "- The user prefers short answers.",
        (("What does enumerate do in Python?", "It yields (index, item) pairs while you loop over a list."),),
    ),
    S(
        "trip-in-may",
        "quiet",
        "2026-12-01 20:00",
        "- Planning a trip to Lisbon in May 2027.\n- Budget: 120 EUR a night.",
    ),
    S("gym-evening", "quiet", "2026-12-01 08:15", "- Gym on Tuesdays at 19:00."),
    S("deadline-month", "quiet", "2026-12-01 10:45", "- The quarterly report is due on 31 December."),
    S("plants-sunday", "quiet", "2026-12-01 13:10", "- Water the plants every Sunday morning."),
    S("past-meeting", "quiet", "2026-12-01 17:40", "- Meeting with the design team at 11:00 today (it went well)."),
    S(
        "bug-fixed",
        "quiet",
        "2026-12-01 12:00",
        "- Fixed the flaky test in test_io.py this morning.",
        (("The test passes now, thanks!", "Great, glad it is fixed."),),
    ),
    S("cat-food-saturday", "quiet", "2026-12-01 19:30", "- Buy cat food on Saturday."),
    S("flight-january", "quiet", "2026-12-01 07:50", "- Flight to Berlin on 14 January at 06:40."),
    S("likes-tea", "quiet", "2026-12-01 15:00", "- The user likes green tea.\n- Works from home on Tuesdays."),
    S("rent-paid", "quiet", "2026-12-01 09:40", "- Pay the rent on the 1st of the month (paid today at 08:00)."),
    S(
        "recipe-chat",
        "quiet",
        "2026-12-01 18:30",
        "",
        (("How long do I boil an egg for a soft yolk?", "About six minutes in boiling water."),),
    ),
    S("review-thursday", "quiet", "2026-12-01 11:00", "- Code review with Priya on Thursday at 14:00."),
    S("nothing-promised", "quiet", "2026-12-01 21:00", "- The user is learning Rust.\n- Prefers examples over theory."),
    # -- something due ----------------------------------------------------------------------------
    S("call-sam", "due", "2026-12-01 14:50", "- Reminder: call Sam at 15:00 today.", words=("sam",)),
    S(
        "dentist-now",
        "due",
        "2026-12-04 09:30",
        "- Dentist appointment on Friday 4 December at 10:00.",
        words=("dentist",),
    ),
    S("pizza-oven", "due", "2026-12-01 18:25", "- Take the pizza out of the oven at 18:30.", words=("pizza", "oven")),
    S(
        "standup-soon",
        "due",
        "2026-12-02 09:10",
        "- Stand-up meeting on Wednesday at 09:30.",
        words=("stand-up", "standup", "meeting"),
    ),
    S(
        "report-deadline",
        "due",
        "2026-12-01 16:30",
        "- The budget report is due today at 17:00.",
        words=("report", "budget"),
    ),
    S(
        "pills",
        "due",
        "2026-12-01 21:55",
        "- Take the evening pills at 22:00 every day.",
        words=("pill", "medication", "medicine"),
    ),
    S(
        "train",
        "due",
        "2026-12-01 07:20",
        "- Train to Porto leaves at 08:05 today; leave home by 07:40.",
        words=("train", "porto"),
    ),
    S(
        "follow-up-pr",
        "due",
        "2026-12-01 15:00",
        "- Promised: at 15:00 today, check whether the CI of pull request 42 passed.",
        words=("42", "pull request", "ci", "pr"),
    ),
    S(
        "laundry",
        "due",
        "2026-12-01 11:55",
        "- Reminder: move the laundry to the dryer at 12:00.",
        words=("laundry", "dryer"),
    ),
    S(
        "interview",
        "due",
        "2026-12-01 13:40",
        "- Job interview with Acme at 14:15 today (video call).",
        words=("interview", "acme"),
    ),
    S(
        "mum-call",
        "due",
        "2026-12-01 19:00",
        "- Call Mum at 19:15 tonight; it is her birthday.",
        words=("mum", "birthday"),
    ),
    S("parking", "due", "2026-12-01 10:50", "- The parking ticket runs out at 11:00.", words=("parking", "ticket")),
    S(
        "webinar",
        "due",
        "2026-12-01 16:05",
        "- Webinar on Kubernetes starts at 16:30 today.",
        words=("webinar", "kubernetes"),
    ),
    S(
        "deploy-window",
        "due",
        "2026-12-01 17:45",
        "- The deploy window opens at 18:00; the user wants to ship release 2.3 then.",
        words=("deploy", "release", "2.3"),
    ),
    S(
        "bread",
        "due",
        "2026-12-01 08:40",
        "- Pick up bread at the bakery before it closes at 09:00.",
        words=("bread", "bakery"),
    ),
    S("vet", "due", "2026-12-01 17:20", "- Vet appointment for the cat at 17:50 today.", words=("vet", "cat")),
    S("plants-now", "due", "2026-12-06 09:00", "- Water the plants every Sunday morning.", words=("plant", "water")),
    S(
        "promised-summary",
        "due",
        "2026-12-01 12:30",
        "- Promised the user: a summary of the meeting notes at 12:30 today.",
        words=("summary", "meeting", "notes"),
    ),
    S(
        "timer-tea",
        "due",
        "2026-12-01 15:02",
        "- Reminder at 15:05: the tea has steeped, take the bag out.",
        words=("tea",),
    ),
    S("bus", "due", "2026-12-01 22:10", "- The last bus home leaves at 22:40.", words=("bus",)),
]


def load_set(name: str, split: str) -> list[Scenario]:
    """Scenarios from ``bench/heartbeat_set/<name>.json``, each of ``split``."""
    rows = json.loads((SETS / f"{name}.json").read_text(encoding="utf-8"))
    return [
        Scenario(
            id=row["id"],
            kind=row["kind"],
            now=row["now"],
            memory=row["memory"],
            chat=tuple((user, assistant) for user, assistant in row["chat"]),
            words=tuple(word.lower() for word in row["words"]),
            split=split,
            source=name,
        )
        for row in rows
    ]


def all_scenarios() -> list[Scenario]:
    """The development scenarios (this file's and the studied sets'), then the held-out ones."""
    studied = ("dev_2", "held_out", "held_out_3", "held_out_4", "held_out_5", "held_out_6", "held_out_7")
    development = [*SCENARIOS, *(scenario for name in studied for scenario in load_set(name, "dev"))]
    held_out = [
        scenario for name in HELD_OUT if (SETS / f"{name}.json").exists() for scenario in load_set(name, "held-out")
    ]
    return [*development, *held_out]


def split_of(scenario: Scenario) -> str:
    """``dev`` or ``held-out``."""
    return scenario.split


def score(scenario: Scenario, reply: str) -> bool:
    """Whether the check-in did the right thing."""
    if scenario.kind == "quiet":
        return is_heartbeat_ok(reply)
    text = reply.lower()
    return not is_heartbeat_ok(reply) and any(word in text for word in scenario.words)


THREAD = ThreadRef(resource_id="cli", thread_id="main")


async def prepare(scenario: Scenario, memory: SQLiteMemory) -> datetime:
    """Put the scenario's notes and chat into ``memory`` (thread ``THREAD``); return its local time."""
    if scenario.memory:
        await memory.set_working_memory(THREAD, scenario.memory)
    for user, assistant in scenario.chat:
        await memory.append_messages(THREAD, [Message.user(user), Message.assistant(assistant)])
    now = datetime.strptime(scenario.now, "%Y-%m-%d %H:%M").replace(tzinfo=ZONE)
    said = (now - timedelta(hours=1)).timestamp()  # the chat was earlier that day, not when the bench runs
    await memory.store.write(lambda c: c.execute("UPDATE messages SET created_at = ?", (said,)))
    return now


async def run_one(client: object, scenario: Scenario, root: Path) -> dict[str, object]:
    workspace = root / scenario.id
    workspace.mkdir()
    memory = SQLiteMemory(workspace / ".cortana" / "memory.db")
    thread = THREAD
    try:
        now = await prepare(scenario, memory)
        clock = ManualClock(now)
        agent = Agent(
            client,  # type: ignore[arg-type]
            name="cortana",
            instructions=assistant_instructions(workspace),
            tools=builtin_tools(workspace),
            memory=memory,
            permissions=workspace_gate(workspace),
            settings=ModelSettings(temperature=0.2, max_tokens=256),
        )
        check_in = companion_check_in(agent, memory, thread, clock=clock)
        started = time.perf_counter()
        reply = await check_in(heartbeat_checklist(workspace))
        seconds = time.perf_counter() - started
        metrics = check_in.last_result.metrics if check_in.last_result else None
        return {
            "id": scenario.id,
            "kind": scenario.kind,
            "split": split_of(scenario),
            "reply": reply,
            "ok": score(scenario, reply),
            "seconds": round(seconds, 1),
            "model_calls": metrics.model_calls if metrics else 0,
            "tool_calls": metrics.tool_calls if metrics else 0,
            "prompt_tokens": metrics.prompt_tokens if metrics else 0,
        }
    finally:
        memory.close()


def summary(rows: list[dict[str, object]]) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for kind in ("quiet", "due"):
        table[kind] = {}
        for split in (*SPLITS, "all"):
            chosen = [r for r in rows if r["kind"] == kind and (split == "all" or r["split"] == split)]
            if chosen:
                good = sum(1 for r in chosen if r["ok"])
                table[kind][split] = f"{good}/{len(chosen)} ({good / len(chosen):.0%})"
    return table


async def main_async(args: argparse.Namespace) -> None:
    chosen = [s for s in all_scenarios() if (not args.split or split_of(s) == args.split)]
    if args.only:
        wanted = args.only.split(",")
        chosen = [s for s in chosen if s.id in wanted]
    if args.sets:
        sets = args.sets.split(",")
        chosen = [s for s in chosen if s.source in sets]
    client = await create_model_client("embedded", model=args.model, threads=args.threads)
    rows: list[dict[str, object]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="heartbeat-eval-") as folder:
            for scenario in chosen:
                row = await run_one(client, scenario, Path(folder))
                rows.append(row)
                mark = "ok " if row["ok"] else "BAD"
                reply = str(row["reply"])[:90]
                print(f"{mark} {row['kind']:<5} {row['split']:<8} {row['id']:<20} {row['seconds']:>5}s  {reply!r}")
                sys.stdout.flush()
    finally:
        await client.aclose()
    table = summary(rows)
    print()
    for kind, splits in table.items():
        goal = "dropped HEARTBEAT_OK" if kind == "quiet" else "named the due item"
        print(f"{kind:<5} ({goal}): " + "; ".join(f"{split} {value}" for split, value in splits.items()))
    name = f"heartbeat_eval_{args.model}" + (f"_{args.split}" if args.split else "")
    name += (f"_{args.sets.replace(',', '_')}" if args.sets else "") + ".json"
    save(args.json or RESULTS / name, {"model": args.model, "summary": table, "rows": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--split", choices=SPLITS)
    parser.add_argument("--only", help="scenario ids, comma-separated")
    parser.add_argument("--sets", help="only the scenarios of these sets, comma-separated (e.g. held_out_9)")
    parser.add_argument("--threads", type=int, help="CPU threads of the embedded engine (default: Cortana's)")
    parser.add_argument("--json", type=Path, help="where to write the results (default: bench/results/, by model)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

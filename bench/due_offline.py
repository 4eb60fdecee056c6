"""The "Due soon" list alone, scored offline on the heartbeat scenarios (no model, a second or two).

Every scenario is set up as ``heartbeat_eval.py`` sets it up (working memory, the chat said an hour
before "now", a manual clock) and :class:`cortana.companion.due.DueSoon` lists what is due, as the
check-in would. Scored:

- ``due``: the list names the item (one of its words is in a listed line);
- ``quiet``: the list is empty.

Sets: ``builtin`` (the 40 in heartbeat_eval.py), ``dev_2``, ``held_out`` and ``held_out_3`` to
``held_out_7`` (all development data now: each was scored once as the held-out set); with
``--held-out``, ``held_out_8`` and ``held_out_9`` instead, where they exist, to report: no rule is
chosen on them.

    python bench/due_offline.py [--verbose] [--held-out]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cortana.companion import ManualClock
from cortana.companion.due import Due, DueSoon
from cortana.memory.sqlite import SQLiteMemory
from heartbeat_eval import HELD_OUT, SCENARIOS, SETS, THREAD, Scenario, load_set, prepare


def scenarios() -> dict[str, list[Scenario]]:
    """The development sets, by name."""
    return {
        "builtin": list(SCENARIOS),
        "dev_2": load_set("dev_2", "dev"),
        "held_out": load_set("held_out", "dev"),
        "held_out_3": load_set("held_out_3", "dev"),
        "held_out_4": load_set("held_out_4", "dev"),
        "held_out_5": load_set("held_out_5", "dev"),
        "held_out_6": load_set("held_out_6", "dev"),
        "held_out_7": load_set("held_out_7", "dev"),
    }


def held_out() -> dict[str, list[Scenario]]:
    """The held-out sets: reported, never a reason to change a rule."""
    return {name: load_set(name, "held-out") for name in HELD_OUT if (SETS / f"{name}.json").exists()}


async def listed(scenario: Scenario, root: Path) -> tuple[datetime, list[Due]]:
    """What DueSoon lists at the scenario's "now", set up as the check-in's bench sets it up."""
    memory = SQLiteMemory(root / scenario.id / "memory.db")
    try:
        now = await prepare(scenario, memory)
        return now, await DueSoon(memory, clock=ManualClock(now)).items(THREAD)
    finally:
        memory.close()


def good(scenario: Scenario, items: list[Due]) -> bool:
    """Whether the list is what a good check-in needs."""
    if scenario.kind == "quiet":
        return not items
    return any(word in item.text.lower() for item in items for word in scenario.words)


async def main_async(verbose: bool, held: bool = False) -> None:
    totals: dict[str, dict[str, list[int]]] = {}
    with tempfile.TemporaryDirectory(prefix="due-offline-") as folder:
        for name, chosen in (held_out() if held else scenarios()).items():
            totals[name] = {"quiet": [0, 0], "due": [0, 0]}
            for scenario in chosen:
                (Path(folder) / scenario.id).mkdir()
                now, items = await listed(scenario, Path(folder))
                ok = good(scenario, items)
                totals[name][scenario.kind][0] += ok
                totals[name][scenario.kind][1] += 1
                if not ok or verbose:
                    print(f"{'ok ' if ok else 'BAD'} {name:<8} {scenario.kind:<5} {scenario.id}")
                    for item in items:
                        print(f"      {item.describe(now)}")
    print()
    for name, kinds in totals.items():
        quiet, due = kinds["quiet"], kinds["due"]
        print(f"{name:<8} quiet (nothing listed) {quiet[0]}/{quiet[1]}; due (item listed) {due[0]}/{due[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every scenario, not only the misses")
    parser.add_argument("--held-out", action="store_true", help="score the held-out sets instead (report only)")
    args = parser.parse_args()
    asyncio.run(main_async(args.verbose, args.held_out))


if __name__ == "__main__":
    main()

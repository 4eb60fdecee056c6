"""Checks that dev.json and heldout.json parse, and prints their counts. Run: python3 validate.py"""

import collections
import json
from pathlib import Path

here = Path(__file__).parent
halves = {name: json.loads((here / name).read_text(encoding="utf-8")) for name in ("dev.json", "heldout.json")}
tasks = {}
for name, data in halves.items():
    assert isinstance(data, list)
    for r in data:
        assert set(r) >= {"task", "prompt", "same", "note"}, r
        assert isinstance(r["same"], bool)
    pos = sum(r["same"] for r in data)
    ts = {r["task"] for r in data}
    tasks[name] = ts
    kinds = collections.Counter(r["note"].split(" (")[0].split(":")[0] for r in data)
    print(
        f"{name}: pairs={len(data)} positives={pos} ({pos / len(data):.0%}) "
        f"negatives={len(data) - pos} distinct_tasks={len(ts)}"
    )
    print("   by note kind:", dict(kinds))
shared = tasks["dev.json"] & tasks["heldout.json"]
print("shared task texts between files:", len(shared))
pd = {r["prompt"] for r in halves["dev.json"]}
ph = {r["prompt"] for r in halves["heldout.json"]}
print("shared prompts between files:", len(pd & ph))

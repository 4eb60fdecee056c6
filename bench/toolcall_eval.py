"""Tool calls of small models on a set no heuristic was tuned on: 257 questions over 91 tools, two halves.

The set (``bench/toolcall_set/``, see its README) was written for this
evaluation, independently of Cortana's heuristics: single calls, choosing
among 3-6 similar tools, parallel calls, the first step of a dependent chain,
and questions no offered tool can answer though the tools look close (many
with numeric arguments only). Each case is in the **development** half or the
**held-out** half, fixed by a hash of its id within its category: decisions
are made on the development half only; both are reported.

``--record MODEL`` runs every case once on the embedded engine and stores the
model's raw answer (text and structured calls) in
``bench/toolcall_set/outputs/MODEL.jsonl``; scoring then runs offline, as the
loop's first tool round would execute the answer under each setting:

- **no recovery**: structured ``tool_calls`` only (what most frameworks run);
- **recovery**: plus calls written as text (``cortana.models.toolparse``);
- **recovery + grounding**: plus the grounding check the loop applies to calls
  written as text (``cortana.agent.grounding``).

A call is executed when it names an offered tool and its arguments validate
against the tool's schema (as ``CallRunner`` does). A case is right when the
executed calls are exactly the expected ones, argument by argument (strings
compared loosely, numbers with a tolerance, ``one_of`` alternatives); a no-fit
case is a false call when anything is executed.

    python bench/toolcall_eval.py                       # score what is recorded
    python bench/toolcall_eval.py --record qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortana.agent.grounding import conversation_evidence, is_grounded
from cortana.errors import ToolError
from cortana.messages import Message, ToolCall
from cortana.models.base import ToolSpec
from cortana.models.toolparse import recover_tool_calls
from cortana.tools import SchemaTool
from report import RESULTS, save, table

SET = Path(__file__).resolve().parent / "toolcall_set"
OUTPUTS = SET / "outputs"
CATEGORIES = ("single", "choice", "parallel", "multistep", "nofit")
SYSTEM = "You are a helpful assistant."


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    tools: list[str]
    prompt: str
    expected: list[dict[str, Any]]
    split: str


def load_tools() -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for path in sorted(SET.glob("tools_*.json")):
        for item in json.loads(path.read_text()):
            tools[item["function"]["name"]] = item["function"]
    return tools


def load_cases() -> list[Case]:
    raw = [json.loads(line) for path in sorted(SET.glob("cases_*.jsonl")) for line in path.read_text().splitlines()]
    held_out: set[str] = set()
    for category in CATEGORIES:
        ids = sorted((c["id"] for c in raw if c["category"] == category), key=_digest)
        held_out.update(ids[1::2])  # every second id in hash order: half of each category, fixed
    return [
        Case(
            c["id"], c["category"], c["tools"], c["prompt"], c["expected"], "held-out" if c["id"] in held_out else "dev"
        )
        for c in raw
    ]


def _digest(case_id: str) -> str:
    return hashlib.sha256(case_id.encode()).hexdigest()


# -- scoring ---------------------------------------------------------------------------------------


def _norm(value: object) -> str:
    return " ".join(re.findall(r"[a-z0-9@.]+", str(value).lower().replace("_", " ").replace("-", " "))).strip(". ")


def value_matches(got: Any, want: Any) -> bool:
    if isinstance(want, dict) and "one_of" in want:
        return any(value_matches(got, option) for option in want["one_of"])
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want or (isinstance(got, str) and got.lower() == str(want).lower())
    if isinstance(want, (int, float)):
        try:
            number = float(got)
        except (TypeError, ValueError):
            return False
        return abs(number - want) <= max(1e-6, 1e-4 * abs(want))
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return False
        return sorted(_norm(g) for g in got) == sorted(_norm(w) for w in want) or all(
            value_matches(g, w) for g, w in zip(got, want, strict=True)
        )
    return isinstance(got, (str, int, float)) and _norm(got) == _norm(want)


def call_matches(call: ToolCall, expected: dict[str, Any]) -> bool:
    if call.name != expected["name"]:
        return False
    return all(
        key in call.arguments and value_matches(call.arguments[key], want)
        for key, want in expected["arguments"].items()
    )


def executed(calls: list[ToolCall], offered: dict[str, SchemaTool]) -> list[ToolCall]:
    """The calls the loop would run: an offered tool, arguments that validate (coerced as the tool would)."""
    run = []
    for call in calls:
        tool = offered.get(call.name)
        if tool is None:
            continue
        try:
            arguments = tool.validate(call.arguments)
        except ToolError:
            continue
        run.append(call.model_copy(update={"arguments": arguments}))
    return run


def right(calls: list[ToolCall], expected: list[dict[str, Any]]) -> bool:
    """Exactly the expected calls (in any order), one to one."""
    if len(calls) != len(expected):
        return False
    unmatched = list(calls)
    for want in expected:
        found = next((call for call in unmatched if call_matches(call, want)), None)
        if found is None:
            return False
        unmatched.remove(found)
    return True


def settings(
    case: Case, row: dict[str, Any], specs: list[ToolSpec], offered: dict[str, SchemaTool]
) -> dict[str, list[ToolCall]]:
    """The calls each setting would hand to the loop's first tool round."""
    content = row.get("content") or ""
    structured = [
        ToolCall(id=f"s{i}", name=c["name"], arguments=c["arguments"] if isinstance(c["arguments"], dict) else {})
        for i, c in enumerate(row.get("tool_calls") or [])
    ]
    remaining, recovered = recover_tool_calls(content, specs)
    evidence = conversation_evidence([Message.user(case.prompt), Message.assistant(remaining)])
    grounded = [c for c in recovered if c.name not in offered or is_grounded(c, offered[c.name], evidence)]
    return {
        "no recovery": structured,
        "recovery": structured or recovered,
        "recovery + grounding": structured or grounded,
    }


SETTINGS = ("no recovery", "recovery", "recovery + grounding")


def score(model: str, cases: list[Case], tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = {row["id"]: row for row in map(json.loads, (OUTPUTS / f"{model}.jsonl").read_text().splitlines())}
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(
        lambda: [0, 0]
    )  # (setting, split, category) -> [hits, n]
    failures: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        row = rows.get(case.id)
        if row is None:
            continue
        specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
        offered = {s.name: SchemaTool(s.name, s.description, s.parameters, lambda **_: "ok") for s in specs}
        for setting, calls in settings(case, row, specs, offered).items():
            run = executed(calls, offered)
            hit = bool(run) if case.category == "nofit" else right(run, case.expected)
            cell = counts[(setting, case.split, case.category)]
            cell[0] += hit
            cell[1] += 1
            if setting == "recovery + grounding" and hit == (case.category == "nofit"):
                failures[case.split].append(case.id)
    result: dict[str, Any] = {"model": model, "cases": len(rows)}
    for (setting, split, category), (hits, n) in sorted(counts.items()):
        result.setdefault(setting, {}).setdefault(split, {})[category] = {"hits": hits, "n": n}
    result["misses_dev"] = failures["dev"]
    return result


def report(results: list[dict[str, Any]]) -> None:
    for split in ("dev", "held-out"):
        print(f"\n{split} half: right calls (single, choice, parallel, multistep) and false calls (nofit)")
        rows = []
        for result in results:
            for setting in SETTINGS:
                cells = result[setting][split]
                rows.append(
                    [f"{result['model']} / {setting}"]
                    + [
                        f"{cells[c]['hits']}/{cells[c]['n']} ({cells[c]['hits'] / cells[c]['n']:.0%})"
                        for c in CATEGORIES
                    ]
                )
        table(["model / setting", *CATEGORIES[:-1], "nofit (false)"], rows)


# -- recording -------------------------------------------------------------------------------------


async def record(
    model: str, cases: list[Case], tools: dict[str, dict[str, Any]], progress: Callable[[str], None]
) -> None:
    """Each case once on the embedded engine (temperature 0, no recovery): the raw answer, stored."""
    from cortana.models.base import ModelRequest, ModelSettings, complete
    from cortana.models.factory import create_model_client

    client = await create_model_client("embedded", model=model, threads=2, recover_text_tool_calls=False)
    OUTPUTS.mkdir(parents=True, exist_ok=True)
    path = OUTPUTS / f"{model}.jsonl"
    done = {json.loads(line)["id"] for line in path.read_text().splitlines()} if path.exists() else set()
    ordered = sorted((c for c in cases if c.id not in done), key=lambda c: (tuple(c.tools), c.id))  # shared prefixes
    try:
        with path.open("a") as out:
            for case in ordered:
                specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
                request = ModelRequest(
                    messages=[Message.system(SYSTEM), Message.user(case.prompt)],
                    tools=specs,
                    settings=ModelSettings(temperature=0, seed=42, max_tokens=300),
                )
                started = time.perf_counter()
                response = await complete(client, request)
                row = {
                    "id": case.id,
                    "model": model,
                    "content": response.message.content,
                    "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in response.message.tool_calls],
                    "finish_reason": response.finish_reason,
                    "prompt_tokens": response.usage.prompt_tokens,
                    "cached_tokens": response.usage.cached_tokens,
                    "seconds": round(time.perf_counter() - started, 2),
                }
                out.write(json.dumps(row) + "\n")
                out.flush()
                progress(f"{case.id} {row['seconds']}s {response.message.content[:70]!r}")
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="MODEL", help="run the set on the embedded engine and store the answers")
    parser.add_argument("--json", type=Path, default=RESULTS / "toolcall_eval.json")
    args = parser.parse_args()
    tools, cases = load_tools(), load_cases()
    if args.record:
        asyncio.run(record(args.record, cases, tools, lambda line: print(line, file=sys.stderr)))
    recorded = sorted(path.stem for path in OUTPUTS.glob("*.jsonl"))
    results = [score(model, cases, tools) for model in recorded]
    splits = {split: sum(case.split == split for case in cases) for split in ("dev", "held-out")}
    print(f"{len(cases)} cases over {len(tools)} tools; dev {splits['dev']}, held-out {splits['held-out']}")
    report(results)
    save(args.json, {"cases": len(cases), "tools": len(tools), "splits": splits, "results": results})


if __name__ == "__main__":
    main()

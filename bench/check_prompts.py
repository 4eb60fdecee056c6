"""Other wordings of the guided path's check, measured on the development half of the tool-call set.

The check (``cortana.models.guided``) is the only layer that sees false calls whose arguments are
all numbers. It used to show the calls alone ("You are about to call: {...}; does that do exactly
what I asked, with the values I gave?"), a weak signal on the bundled models. This script asked
three other questions about the first call the grammar wrote for each development case (single,
choice and no-fit questions) and scored how well each separates right calls from calls made for
no-fit questions:

- ``v1``: the call with its tool's description ("You are about to call X, which does this: ...;
  is that exactly what I asked for?"), yes or no: it won, and is the check shipped since
  (``bench/toolcall_eval.py --record-check`` records it for every case);
- ``v2``: "does it do what I asked, or does my request need a different tool?", same or different;
- ``v3``: "if you could write one new function for this, what would its name be?", the name
  generated freely, then compared word by word with the called tool's name and description.

The recorded answers are in ``bench/toolcall_set/outputs/MODEL.check_prompts.jsonl``. The three
wordings were compared on the development half; ``--held-out`` then records ``v1`` alone on the
held-out half, to see whether what the development half showed holds.

    python bench/check_prompts.py --record qwen2.5-coder-1.5b [--held-out]   # 10-20 s a case, 2 cores
    python bench/check_prompts.py --report qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cortana.messages import ToolCall
from cortana.models.base import ToolSpec
from toolcall_eval import OUTPUTS, SchemaTool, _rows, case_request, guided_settings, load_cases, load_tools, right

V1 = (
    "You are about to call {name}, which does this: {description}\nwith these arguments: {arguments}\n"
    "Is that exactly what I asked for? Answer yes or no."
)
V2 = (
    "The tool {name} does this: {description}\nDoes it do what I asked, or does my request need a different "
    "tool that is not offered? Answer 'same' if it does what I asked, 'different' if not."
)
V3 = (
    "Forget the tools above. If you could write one new function that does exactly what I asked, "
    "what would its name be? Answer with the snake_case name only."
)
GENERIC = frozenset(
    [
        "get",
        "calculate",
        "compute",
        "find",
        "fetch",
        "show",
        "check",
        "is",
        "run",
        "do",
        "make",
        "the",
        "a",
        "an",
        "of",
        "for",
        "to",
        "in",
        "on",
        "by",
        "from",
    ]
)


def _first_calls(model: str, split: str = "dev") -> list[tuple[Any, ToolCall]]:
    """(case, the first call the grammar wrote) for ``split``'s single, choice and no-fit cases."""
    tools = load_tools()
    guided, free = _rows(OUTPUTS / f"{model}.guided.jsonl"), _rows(OUTPUTS / f"{model}.jsonl")
    chosen = []
    for case in load_cases():
        if case.split != split or case.category not in ("single", "choice", "nofit") or case.id not in guided:
            continue
        specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
        offered = {s.name: SchemaTool(s.name, s.description, s.parameters, lambda **_: "ok") for s in specs}
        calls = guided_settings(case, free[case.id], guided[case.id], specs, offered, None)["grammar, one call"]
        calls = [call for call in calls if call.name in offered]
        if calls:
            chosen.append((case, calls[0]))
    return chosen


async def record(model: str, split: str = "dev") -> None:
    from cortana.models.factory import create_model_client
    from cortana.models.guided import _word_logprob

    out_path = OUTPUTS / f"{model}.check_prompts.jsonl"
    done = set(_rows(out_path))
    tools = load_tools()
    client = await create_model_client("embedded", model=model, threads=2)
    guided = client.guided  # type: ignore[attr-defined]
    try:
        with open(out_path, "a") as out:  # noqa: ASYNC230 - one line per case, flushed as it goes
            for case, call in _first_calls(model, split):
                if case.id in done:
                    continue
                request, started = case_request(case, tools), time.perf_counter()
                description = tools[call.name]["description"]
                row: dict[str, Any] = {"id": case.id, "category": case.category}
                row |= {"tool": call.name, "arguments": call.arguments}
                ask = V1.format(name=call.name, description=description, arguments=json.dumps(call.arguments))
                prompt = await guided.render(request, [{"role": "user", "content": ask}])
                _, logprobs, _ = await guided._ask(prompt, ["yes", "no", "Yes", "No"])
                row["v1"] = round(_word_logprob(logprobs, "no") - _word_logprob(logprobs, "yes"), 3)
                if split != "dev":  # the wordings were compared on the development half: v1 alone here
                    row["seconds"] = round(time.perf_counter() - started, 2)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(case.id, call.name, row["v1"], row["seconds"], flush=True)
                    continue
                ask = V2.format(name=call.name, description=description)
                prompt = await guided.render(request, [{"role": "user", "content": ask}])
                _, logprobs, _ = await guided._ask(prompt, ["same", "different", "Same", "Different"])
                row["v2"] = round(_word_logprob(logprobs, "different") - _word_logprob(logprobs, "same"), 3)
                prompt = await guided.render(request, [{"role": "user", "content": V3}])
                body = {"prompt": prompt, "grammar": "root ::= [a-z] [a-z_]*\n", "n_predict": 16, "temperature": 0}
                data = await guided.http.request_json("POST", "/completion", json_body=body | {"cache_prompt": True})
                row["v3"] = str(data.get("content", "")).strip()
                row["seconds"] = round(time.perf_counter() - started, 2)
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(case.id, call.name, row["v1"], row["v2"], row["v3"], row["seconds"], flush=True)
    finally:
        await client.aclose()


def _words(text: str) -> set[str]:
    words = set()
    for word in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")):
        if word not in GENERIC and len(word) >= 3:
            words.add(next((word[: -len(s)] for s in ("ing", "es", "s", "ed") if word.endswith(s)), word))
    return words


def _auc(right_scores: list[float], false_scores: list[float]) -> float:
    """The chance that a false call scores higher (more "reject") than a right one."""
    pairs = [(1.0 if f > r else 0.5 if f == r else 0.0) for r in right_scores for f in false_scores]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def report(model: str, split: str = "dev") -> dict[str, Any]:
    cases = {case.id: case for case in load_cases()}
    tools = load_tools()
    guided = _rows(OUTPUTS / f"{model}.guided.jsonl")
    rows = [row for row in _rows(OUTPUTS / f"{model}.check_prompts.jsonl").values() if cases[row["id"]].split == split]

    def first_check(row: dict[str, Any]) -> float | None:
        for path in guided[row["id"]]["paths"].values():
            if path.get("calls") and path["calls"][0]["name"] == row["tool"] and path.get("check"):
                return float(path["check"].get("margin"))
        return None

    def overlap(row: dict[str, Any]) -> float:
        ideal = _words(row["v3"])
        return -len(ideal & _words(row["tool"] + " " + tools[row["tool"]]["description"])) / max(len(ideal), 1)

    calls = {row["id"]: ToolCall(id="c", name=row["tool"], arguments=row["arguments"]) for row in rows}
    good = [row for row in rows if row["category"] != "nofit" and right([calls[row["id"]]], cases[row["id"]].expected)]
    false = [row for row in rows if row["category"] == "nofit"]
    scores = {"shipped check": first_check, "v1": lambda r: r["v1"]}
    if split == "dev":
        scores |= {"v2": lambda r: r["v2"], "v3 overlap": overlap}
    result: dict[str, Any] = {"model": model, "split": split, "right calls": len(good), "no-fit calls": len(false)}
    for name, score in scores.items():
        right_scores = [s for r in good if (s := score(r)) is not None]
        false_scores = [s for r in false if (s := score(r)) is not None]
        caught = {}
        for lost in (1, 2, 3):  # the most no-fit calls caught while turning away at most `lost` right ones
            threshold = sorted(right_scores, reverse=True)[lost] if len(right_scores) > lost else None
            caught[lost] = sum(s > threshold for s in false_scores) if threshold is not None else None
        result[name] = {"auc": round(_auc(right_scores, false_scores), 3), "caught, losing 1/2/3 right": caught}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="MODEL")
    parser.add_argument("--report", metavar="MODEL")
    parser.add_argument("--held-out", action="store_true", help="record v1 on the held-out half")
    args = parser.parse_args()
    if args.record:
        asyncio.run(record(args.record, "held-out" if args.held_out else "dev"))
    if args.report:
        print(json.dumps([report(args.report, split) for split in ("dev", "held-out")], indent=2))


if __name__ == "__main__":
    main()

"""Other wordings of the guided path's check, measured on the development half of the tool-call set.

The check (``cortana.models.guided``) is the only layer that sees false calls whose arguments are
all numbers. It used to show the calls alone ("You are about to call: {...}; does that do exactly
what I asked, with the values I gave?"), a weak signal on the bundled models. This script asked
other questions about the first call the grammar wrote for each development case (single,
choice and no-fit questions) and scored how well each separates right calls from calls made for
no-fit questions:

- ``v1``: the call with its tool's description ("You are about to call X, which does this: ...;
  is that exactly what I asked for?"), yes or no: it won, and is the check shipped since
  (``bench/toolcall_eval.py --record-check`` records it for every case);
- ``v2``: "does it do what I asked, or does my request need a different tool?", same or different;
- ``v3``: "if you could write one new function for this, what would its name be?", the name
  generated freely, then compared word by word with the called tool's name and description;

and, in a second round, four more built on ``v1``:

- ``v4``: the same question in a fresh, short conversation that holds only the request, the
  tool's description and the call (no tool list, no system prompt of the assistant's);
- ``v5``: ``v1`` after four worked examples (two close-but-wrong tools answered "no", two right
  ones "yes"; written for this, on requests and tools that are not in the set);
- ``v6``: "does that do exactly what I asked, or only something close to it?", exact or close;
- ``v7``: one sentence first on what I asked for and what the tool does, then "Answer: yes/no"
  (the margin of that word): the model names the difference (asked for the current volume, it
  writes that the tool sets the volume) and answers yes all the same (AUC 0.69);

and, in a third round (issue 44), When2Call's four answers (NVIDIA, 2025) in the one check prompt:

- ``v8``: the call with its tool's description, then one word of four: ``call`` (it is what I asked
  for), ``ask`` (a question to me first), ``cannot`` (no offered tool can do it), ``answer`` (no tool
  needed); the margin is log P(ask, cannot or answer) - log P(call), each word's first-token
  probability from the engine, summed over spellings. On the 1.5B model's development half it
  separates worse than ``v1`` (AUC 0.82 against 0.95; summed with ``v1``, 0.92), so it was not
  asked on the held-out half nor of the 0.5B model;

with ``v1+v4`` (and others) the sum of two wordings' margins, each standardised over the
development rows. None won on the development half where it counts: ``v1+v4`` catches 3 more
no-fit calls of 23 while losing one right call, at the same AUC, for a second prompt per check
(docs/engines.md).

The recorded answers are in ``bench/toolcall_set/outputs/MODEL.check_prompts.jsonl`` (the 1.5B
model was asked all seven, the 0.5B ``v1`` and ``v4`` to ``v6``, where ``v1`` also won: AUC 0.78
against 0.54-0.56). The wordings were compared on the development half; ``--held-out`` then
records ``v1`` alone on the held-out half, to see whether what the development half showed holds.

    python bench/check_prompts.py --record qwen2.5-coder-1.5b [--held-out] [--wordings v1,v4]  # 10-20 s a case
    python bench/check_prompts.py --record qwen2.5-coder-1.5b --wordings v8
    python bench/check_prompts.py --report qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable
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
V4_SYSTEM = (
    "You check function calls. Given a request and a call, say whether the call does exactly what the request asks."
)
V4 = (
    "Request: {prompt}\n\nFunction: {name}: {description}\nCall: {name}({arguments})\n\n"
    "Does this call do exactly what the request asks for? Answer yes or no."
)
V5 = (
    "Before you call a tool, check that it does what I asked, not just something close. For example:\n"
    '- I asked "How long is the drive from Lyon to Paris?" and you were about to call road_distance, which '
    "returns the distance in km between two cities: no, I asked for a time, not a distance.\n"
    '- I asked "Remind me to water the plants at 6pm" and you were about to call create_reminder, which '
    "creates a reminder with a text and a time: yes.\n"
    '- I asked "What is 15% of 80?" and you were about to call compound_interest, which computes the interest '
    "earned on a deposit over some years: no, that is a different calculation.\n"
    '- I asked "Play something by Miles Davis" and you were about to call play_artist, which plays songs by '
    "an artist: yes.\n\n"
    "Now you are about to call {name}, which does this: {description}\nwith these arguments: {arguments}\n"
    "Is that exactly what I asked for? Answer yes or no."
)
V6 = (
    "You are about to call {name}, which does this: {description}\nwith these arguments: {arguments}\n"
    "Does that do exactly what I asked, or only something close to it? Answer 'exact' or 'close'."
)
V7 = (
    "You are about to call {name}, which does this: {description}\nwith these arguments: {arguments}\n"
    "First say in one short sentence what I asked for and what that tool does; then, on a new line, "
    "'Answer: yes' if it is exactly what I asked for, 'Answer: no' if not."
)
V8 = (
    "You are about to call {name}, which does this: {description}\nwith these arguments: {arguments}\n"
    "What should you do? Answer with one word: 'call' if that call is exactly what I asked for; 'ask' if you "
    "need to ask me something first; 'cannot' if none of the offered tools can do what I asked; 'answer' if "
    "you can answer me directly, without a tool."
)
V8_WORDS = ("call", "ask", "cannot", "answer")
V7_GRAMMAR = 'root ::= [^\\n]{1,300} "\\nAnswer: " ("yes" | "no")\n'
DEV_WORDINGS = ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8")
"""Every wording is asked on the development half; the held-out half got ``v1``, and ``v8`` to see it held out."""
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


async def record(model: str, split: str = "dev", wordings: tuple[str, ...] = DEV_WORDINGS) -> None:
    """Ask each of ``wordings`` not asked yet about each first call of ``split``; the file is rewritten as it goes."""
    from cortana.models.factory import create_model_client

    out_path = OUTPUTS / f"{model}.check_prompts.jsonl"
    rows = _rows(out_path)
    wanted = wordings if split == "dev" else tuple(w for w in wordings if w in ("v1", "v8")) or ("v1",)
    tools = load_tools()
    client = await create_model_client("embedded", model=model, threads=2)
    try:
        for case, call in _first_calls(model, split):
            row = rows.setdefault(case.id, {"id": case.id, "category": case.category})
            row |= {"tool": call.name, "arguments": call.arguments}
            missing = [wording for wording in wanted if wording not in row]
            if not missing:
                continue
            started = time.perf_counter()
            for wording in missing:
                row[wording] = await _ask_wording(client.guided, wording, case, call, tools)  # type: ignore[attr-defined]
            row["seconds"] = round(row.get("seconds", 0) + time.perf_counter() - started, 2)
            out_path.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
            print(case.id, call.name, *(row[w] for w in missing), flush=True)
    finally:
        await client.aclose()


async def _ask_wording(guided: Any, wording: str, case: Any, call: ToolCall, tools: dict[str, Any]) -> float | str:
    """One wording's answer about ``call``: log P(reject) - log P(accept), or ``v3``'s generated name."""
    from cortana.messages import Message
    from cortana.models.base import ModelRequest
    from cortana.models.guided import _FLOOR, _word_logprob

    request = case_request(case, tools)
    fields = {"name": call.name, "description": tools[call.name]["description"]}
    fields |= {"arguments": json.dumps(call.arguments), "prompt": case.prompt}
    if wording == "v3":
        prompt = await guided.render(request, [{"role": "user", "content": V3}])
        body = {"prompt": prompt, "grammar": "root ::= [a-z] [a-z_]*\n", "n_predict": 16, "temperature": 0}
        data = await guided.http.request_json("POST", "/completion", json_body=body | {"cache_prompt": True})
        return str(data.get("content", "")).strip()
    if wording == "v7":  # a sentence of reasoning first, then the verdict: its token's margin
        prompt = await guided.render(request, [{"role": "user", "content": V7.format(**fields)}])
        body = {"prompt": prompt, "grammar": V7_GRAMMAR, "n_predict": 120, "temperature": 0, "n_probs": 10}
        data = await guided.http.request_json("POST", "/completion", json_body=body | {"cache_prompt": True})
        said, verdict = "", {}
        for step in data.get("completion_probabilities") or []:  # the first yes or no after "Answer:"
            token = str(step.get("token", ""))
            if token.strip().lower() in ("yes", "no") and said.rstrip().endswith("Answer:"):
                verdict = step
                break
            said += token
        logprobs = tuple(
            (str(i.get("token", "")), float(i.get("logprob", _FLOOR))) for i in verdict.get("top_logprobs", [])
        )
        return round(_word_logprob(logprobs, "no") - _word_logprob(logprobs, "yes"), 3)
    if wording == "v8":  # When2Call's four answers: log P(any but "call") - log P("call")
        prompt = await guided.render(request, [{"role": "user", "content": V8.format(**fields)}])
        _, logprobs, _ = await guided._ask(prompt, [*V8_WORDS, *(w.title() for w in V8_WORDS)])
        others = [math.exp(_word_logprob(logprobs, w)) for w in V8_WORDS[1:]]
        return round(math.log(sum(others)) - _word_logprob(logprobs, "call"), 3)
    if wording == "v4":  # a fresh conversation: the request, the tool and the call, nothing else
        request = ModelRequest(messages=[Message.system(V4_SYSTEM)], tools=[], settings=request.settings)
    text, (accept, reject) = {
        "v1": (V1, ("yes", "no")),
        "v2": (V2, ("same", "different")),
        "v4": (V4, ("yes", "no")),
        "v5": (V5, ("yes", "no")),
        "v6": (V6, ("exact", "close")),
    }[wording]
    prompt = await guided.render(request, [{"role": "user", "content": text.format(**fields)}])
    _, logprobs, _ = await guided._ask(prompt, [accept, reject, accept.title(), reject.title()])
    return round(_word_logprob(logprobs, reject) - _word_logprob(logprobs, accept), 3)


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
    asked = [wording for wording in DEV_WORDINGS if rows and all(wording in row for row in rows)]
    scores: dict[str, Callable[[dict[str, Any]], float | None]] = {"calls alone (earlier check)": first_check}
    scores |= {wording: _field(wording) for wording in asked if wording != "v3"}
    if "v3" in asked:
        scores["v3 overlap"] = overlap
    for extra in ("v4", "v5", "v6", "v7", "v8"):
        if "v1" in asked and extra in asked:
            scores[f"v1+{extra}"] = _summed([_standardised(good + false, w) for w in ("v1", extra)])
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


def _field(name: str) -> Callable[[dict[str, Any]], float]:
    return lambda row: float(row[name])


def _standardised(rows: list[dict[str, Any]], name: str) -> Callable[[dict[str, Any]], float]:
    """``name``'s margin in standard deviations from its mean over ``rows``, so two wordings can be summed."""
    values = [float(row[name]) for row in rows]
    mean, spread = statistics.fmean(values), statistics.pstdev(values) or 1.0
    return lambda row: (float(row[name]) - mean) / spread


def _summed(parts: list[Callable[[dict[str, Any]], float]]) -> Callable[[dict[str, Any]], float]:
    return lambda row: sum(part(row) for part in parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="MODEL")
    parser.add_argument("--report", metavar="MODEL")
    parser.add_argument("--held-out", action="store_true", help="record v1 (and v8, if named) on the held-out half")
    parser.add_argument("--wordings", default=",".join(DEV_WORDINGS), help="which to record on the development half")
    args = parser.parse_args()
    if args.record:
        wordings = tuple(w for w in args.wordings.split(",") if w in DEV_WORDINGS)
        asyncio.run(record(args.record, "held-out" if args.held_out else "dev", wordings))
    if args.report:
        print(json.dumps([report(args.report, split) for split in ("dev", "held-out")], indent=2))


if __name__ == "__main__":
    main()

"""Every layer between a small model and a tool call, measured from the model alone up (issue 63).

On the recorded answers of ``bench/toolcall_eval.py`` (both bundled models, both
halves, every category and every kind of no-fit question), the first tool
round is scored as each layer would leave it, one layer added per row:

1. **the model alone, llama.cpp's tool calls**: what a client of llama.cpp's
   own server runs (its ``tool_calls``; Cortana not involved);
2. **the model alone, every call it writes**: any call in the answer's text,
   to any name, offered or not, arguments as written (what the model meant to
   do; a false call when no offered tool answers);
3. **+ text recovery**: calls of offered tools written as text, arguments that
   validate (a call to a name not offered is never started);
4. **+ grounding**: a call written as text runs only if one of its checkable
   arguments is in the question;
5. **+ grammar**: a free start that opens a call has it written under the
   tools' grammar (added calls only when grounded);
6. **+ check**: the model's yes/no on the calls with their tools' descriptions,
   at the bundled model's threshold;
7. **+ judge veto**: a first call whose tool the judge does not allow for the
   question is dropped;
8. **+ judge, prose to call**: a prose answer that names a tool the judge says
   fits gets that tool's call, written and checked.

Each row reports right calls (single, choice, parallel, multistep), false
calls on each no-fit kind (``nofit``: tools that look close; ``unrelated``:
tools of another field; ``samefield``: one tool of the question's field that
does something else; ``general``: a general question with the workspace
tools), the balanced score (harmonic mean of the right-call rate over single,
choice and parallel and the abstention rate over every no-fit kind), and what
the layer changed against the row above: right calls won and lost, false calls
added and removed. The judge's scores are out of fold on the development half
and from heads trained on the whole development half on the held-out half
(``bench/tool_judge.py``); ``--new-negatives`` trains them on the new kinds'
development half too.

    python bench/toolcall_layers.py
    python bench/toolcall_layers.py --new-negatives
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import tool_judge as tj
import toolcall_eval as te
from cortana.agent.judge import tool_text
from cortana.messages import ToolCall
from cortana.models.base import ToolSpec
from cortana.models.toolparse import recover_tool_calls
from cortana.tools import SchemaTool
from report import RESULTS, save, table

LAYERS = (
    "model alone: llama.cpp's tool calls",
    "model alone: every call it writes",
    "+ text recovery",
    "+ grounding",
    "+ grammar",
    "+ check",
    "+ judge veto",
    "+ judge, prose to call",
)
RIGHT = ("single", "choice", "parallel", "multistep")
BALANCED = ("single", "choice", "parallel")

_WRITTEN = re.compile(
    r'^\s*(?:```\w*\s*)?(?:<tool_call>\s*)?\[?\s*\{+\s*"name"\s*:\s*"(?P<name>[^"]{1,80})"', re.IGNORECASE
)


def written_calls(content: str, specs: list[ToolSpec]) -> list[ToolCall]:
    """Every call the answer writes, to any name: what the recovery reads, else an answer that opens a call."""
    _, recovered = recover_tool_calls(content, specs)
    if recovered:
        return recovered
    match = _WRITTEN.match(content)
    return [ToolCall(id="w0", name=match["name"], arguments={})] if match else []


def layer_calls(
    answer: tj.Answer,
    row: dict[str, Any],
    guided: dict[str, Any],
    tools: dict[str, dict[str, Any]],
    judge: tuple[tj.Scores, Any],
    margin: float | None,
) -> dict[str, list[ToolCall]]:
    """The calls the first tool round runs (or, for the model alone, makes) with each layer added."""
    case = answer.case
    scores, weights = judge
    specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
    offered = {s.name: SchemaTool(s.name, s.description, s.parameters, lambda **_: "ok") for s in specs}
    unguided = te.settings(case, row, specs, offered)
    guided_ways = te.guided_settings(case, row, guided, specs, offered, margin)
    judged = tj.ways(answer, weights, scores, margin)
    allowed, _ = scores.fit(weights, case.prompt, case.tools)
    checked = te.executed(guided_ways[te.SHIPPED], offered)
    return {
        LAYERS[0]: te.executed(unguided["no recovery"], offered),
        LAYERS[1]: written_calls(row.get("content") or "", specs),
        LAYERS[2]: te.executed(unguided["recovery"], offered),
        LAYERS[3]: te.executed(unguided["recovery + grounding"], offered),
        LAYERS[4]: te.executed(guided_ways["grammar, added calls grounded"], offered),
        LAYERS[5]: checked,
        LAYERS[6]: checked if checked and checked[0].name in allowed else [],
        LAYERS[7]: judged["check + judge"],
    }


def outcome(case: te.Case, calls: list[ToolCall]) -> bool:
    """Right: the expected calls exactly, or none at all where no offered tool answers."""
    return not calls if case.category in te.NO_FIT else te.right(calls, case.expected)


def balanced(cells: dict[str, list[int]]) -> float:
    right = sum(cells[c][0] for c in BALANCED) / max(1, sum(cells[c][1] for c in BALANCED))
    abstain = sum(cells[k][0] for k in te.NO_FIT) / max(1, sum(cells[k][1] for k in te.NO_FIT))
    return 0.0 if right + abstain == 0 else round(2 * right * abstain / (right + abstain), 3)


def measure(new_negatives: bool) -> dict[str, Any]:
    tools, cases = te.load_tools(), te.load_cases()
    texts = {name: tool_text(name, spec["description"]) for name, spec in {**tools, **tj.builtin_specs()}.items()}
    vectors = tj.Embeddings()
    asyncio.run(
        vectors.fill({c.prompt for c in cases} | {a.question for a in tj.build_questions(cases)}, set(texts.values()))
    )
    weights, scores, about = tj.train_all(cases, tools, vectors, texts, new_negatives)
    result: dict[str, Any] = {"judge": about, "new negatives": new_negatives, "models": {}}
    for model in tj.MODELS:
        rows = te._rows(te.OUTPUTS / f"{model}.jsonl")
        guided_rows = te._rows(te.OUTPUTS / f"{model}.guided.jsonl")
        margin = te.shipped_margin(model)
        cells: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        changes: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # right +/-, false +/-
        unknown: dict[str, list[int]] = defaultdict(
            lambda: [0, 0]
        )  # split -> [no-fit answers naming no offered tool, n]
        for answer in tj.answers(model, cases, tools):
            case = answer.case
            per_layer = layer_calls(answer, rows[case.id], guided_rows[case.id], tools, (scores, weights), margin)
            before: bool | None = None
            for layer, calls in per_layer.items():
                ok = outcome(case, calls)
                cell = cells[(layer, case.split, case.category)]
                cell[0] += ok
                cell[1] += 1
                if before is not None and ok != before:
                    change = changes[(layer, case.split)]
                    if case.category in te.NO_FIT:
                        change[2 + ok] += 1  # a false call added (ok False) or removed
                    elif case.category in RIGHT:
                        change[0 + (not ok)] += 1
                before = ok
            if case.category in te.NO_FIT:
                written = per_layer[LAYERS[1]]
                unknown[case.split][0] += any(call.name not in case.tools for call in written)
                unknown[case.split][1] += 1
        result["models"][model] = {
            "check margin": margin,
            "calls to names not offered (model alone, no-fit questions)": dict(unknown),
            "layers": {
                split: {
                    layer: {
                        **{c: cells[(layer, split, c)] for c in te.CATEGORIES},
                        "balanced": balanced({c: cells[(layer, split, c)] for c in te.CATEGORIES}),
                        "right won, right lost, false added, false removed": changes[(layer, split)],
                    }
                    for layer in LAYERS
                }
                for split in ("dev", "held-out")
            },
        }
    return result


def report(result: dict[str, Any]) -> None:
    for model, found in result["models"].items():
        print(
            f"\n{model} (check margin {found['check margin']}); no-fit answers calling a name not offered:"
            f" {found['calls to names not offered (model alone, no-fit questions)']}"
        )
        for split, layers in found["layers"].items():
            print(f"\n{model}, {split} half: right calls; false calls on each no-fit kind")
            rows = []
            for layer, cells in layers.items():
                won, lost, added, removed = cells["right won, right lost, false added, false removed"]
                rows.append(
                    [layer]
                    + [f"{cells[c][0]}/{cells[c][1]}" for c in RIGHT]
                    + [f"{cells[k][1] - cells[k][0]}/{cells[k][1]}" for k in te.NO_FIT]
                    + [f"{cells['balanced']:.3f}", f"+{won} -{lost} / +{added} -{removed}"]
                )
            table(["layer", *RIGHT, *(f"{k} false" for k in te.NO_FIT), "balanced", "right / false vs above"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-negatives", action="store_true", help="the judge trained on the new kinds too")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args.new_negatives)
    report(result)
    name = "toolcall_layers_new_negatives.json" if args.new_negatives else "toolcall_layers.json"
    save(args.json or RESULTS / name, result)


if __name__ == "__main__":
    main()

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
   fits gets that tool's call, written and checked. This row is what ships.

A second table takes the shipped rows apart (each without one part) and adds
what was measured and not shipped:

- **purpose words in the check**: the threshold rises with the words the
  question shares with the tool's name and description
  (``cortana.models.guided.purpose_words``): a call is kept when its margin is
  below ``m0 + k * words``, ``m0`` and ``k`` chosen on the development half
  (``toolcall_eval.tune_rule``: the best balanced score that keeps every right
  call the margin alone kept there);
- **pair veto, any question**: a first call whose tool the judge's pair head
  scores below a threshold is dropped, whatever the question head says (the
  veto above acts only on questions it takes for general ones); the threshold
  is the one with the best balanced score on the development half.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tool_judge as tj
import toolcall_eval as te
from cortana.agent.judge import tool_text
from cortana.messages import ToolCall
from cortana.models.base import ToolSpec
from cortana.models.guided import purpose_words
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


@dataclass
class Pieces:
    """One case's answer, taken apart: what each layer starts from."""

    case: te.Case
    fixed: dict[str, list[ToolCall]]  # the rows up to the check, which no chosen number changes
    precheck: list[ToolCall]  # the grammar's calls (or a prose answer's recovered ones) before the check
    unguarded: list[ToolCall]  # the same with a prose answer's text calls not grounded
    text_only: list[ToolCall]  # no grammar: the text recovery with grounding, as on engines without grammars
    margin: float | None  # the check's margin on a call the free answer opened; None: no check asked
    words: int  # the purpose words of the first call's tool
    allowed: set[str]  # the tools the judge allows for the question
    prose_call: list[ToolCall]  # a prose answer naming a tool the judge says fits: the call it gets


def pieces_of(
    answer: tj.Answer,
    row: dict[str, Any],
    guided: dict[str, Any],
    tools: dict[str, dict[str, Any]],
    judge: tuple[tj.Scores, Any],
    margin: float | None,
) -> Pieces:
    """The calls of the rows no chosen number changes, and what the others are made from."""
    case = answer.case
    scores, weights = judge
    specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
    offered = {s.name: SchemaTool(s.name, s.description, s.parameters, lambda **_: "ok") for s in specs}
    unguided = te.settings(case, row, specs, offered)
    guided_ways = te.guided_settings(case, row, guided, specs, offered, margin)
    allowed, _ = scores.fit(weights, case.prompt, case.tools)
    precheck = te.executed(guided_ways["grammar, added calls grounded"], offered)
    prose_first = answer.margin is None
    first = precheck[0].name if precheck else None
    judged = tj.ways(answer, weights, scores, margin)["check + judge"]
    return Pieces(
        case=case,
        fixed={
            LAYERS[0]: te.executed(unguided["no recovery"], offered),
            LAYERS[1]: written_calls(row.get("content") or "", specs),
            LAYERS[2]: te.executed(unguided["recovery"], offered),
            LAYERS[3]: te.executed(unguided["recovery + grounding"], offered),
            LAYERS[4]: precheck,
            LAYERS[5]: te.executed(guided_ways[te.SHIPPED], offered),
        },
        precheck=precheck,
        unguarded=te.executed(unguided["recovery"], offered) if prose_first else precheck,
        text_only=te.executed(unguided["recovery + grounding"], offered),
        margin=answer.margin,
        words=purpose_words(case.prompt, first, tools[first]["description"]) if first else 0,
        allowed=allowed,
        prose_call=judged if not precheck else [],
    )


@dataclass(frozen=True)
class Rule:
    """The check as shipped: a call the free answer opened is kept when its margin is below ``m0 + k * words``;
    ``judge``: the judge's veto; ``prose``: a prose answer naming a fitting tool gets its call."""

    m0: float | None
    k: float = 0.0
    judge: bool = True
    prose: bool = False

    def keeps(self, piece: Pieces) -> bool:
        return piece.margin is None or self.m0 is None or piece.margin < self.m0 + self.k * piece.words

    def calls(self, piece: Pieces, start: list[ToolCall] | None = None, check: bool = True) -> list[ToolCall]:
        calls = piece.precheck if start is None else start
        if check and start is None and not self.keeps(piece):
            calls = []
        if self.judge and calls and calls[0].name not in piece.allowed:
            calls = []
        if self.prose and not piece.precheck:
            calls = calls or piece.prose_call
        return calls


def _cells(pieces: list[Pieces], calls: Callable[[Pieces], list[ToolCall]]) -> dict[str, list[int]]:
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for piece in pieces:
        cell = cells[piece.case.category]
        cell[0] += outcome(piece.case, calls(piece))
        cell[1] += 1
    return cells


def ablations(
    shipped: Rule, tuned: Rule, scores: tj.Scores, threshold: float
) -> dict[str, Callable[[Pieces], list[ToolCall]]]:
    """The shipped rows, each with one part taken out, and with what was measured and not shipped."""
    return {
        "shipped: grammar, check, judge veto, prose to call": shipped.calls,
        "without grounding (prose answers' text calls)": lambda p: shipped.calls(
            p, p.unguarded if p.margin is None else None
        ),
        "without the grammar (text recovery and grounding only)": lambda p: shipped.calls(p, p.text_only, check=False),
        "without the check": lambda p: shipped.calls(p, p.precheck, check=False),
        "without the judge veto": Rule(shipped.m0, shipped.k, False, shipped.prose).calls,
        "without prose to call": Rule(shipped.m0, shipped.k, shipped.judge, False).calls,
        f"with purpose words in the check (m0 {tuned.m0}, k {tuned.k}; not shipped)": tuned.calls,
        "with a pair veto on any question (not shipped)": lambda p: pair_vetoed(
            shipped.calls(p), p.case, scores, threshold
        ),
    }


def layer_calls(piece: Pieces, rule: Rule) -> dict[str, list[ToolCall]]:
    """The calls of each row for one case, one layer added per row."""
    return {**piece.fixed, LAYERS[6]: Rule(rule.m0, rule.k, True, False).calls(piece), LAYERS[7]: rule.calls(piece)}


def pair_vetoed(calls: list[ToolCall], case: te.Case, scores: tj.Scores, threshold: float) -> list[ToolCall]:
    """``calls`` unless the first one's tool scores below ``threshold`` on the judge's pair head."""
    return [] if calls and scores.pair[(case.prompt, calls[0].name)] < threshold else calls


def choose_pair_threshold(found: list[tuple[te.Case, list[ToolCall]]], scores: tj.Scores) -> float:
    """The pair-veto threshold with the best balanced score on the development half (ties: the lower, vetoing less)."""
    dev = [(case, calls) for case, calls in found if case.split == "dev"]
    candidates = sorted({scores.pair[(case.prompt, calls[0].name)] for case, calls in dev if calls})
    best: tuple[float, float] = (-1.0, float("-inf"))
    for threshold in [float("-inf"), *(value + 1e-9 for value in candidates)]:
        cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for case, calls in dev:
            cell = cells[case.category]
            cell[0] += outcome(case, pair_vetoed(calls, case, scores, threshold))
            cell[1] += 1
        score = balanced(cells)
        if score > best[0]:
            best = (score, threshold)
    return best[1]


def outcome(case: te.Case, calls: list[ToolCall]) -> bool:
    """Right: the expected calls exactly, or none at all where no offered tool answers."""
    return not calls if case.category in te.NO_FIT else te.right(calls, case.expected)


def _shipped_purpose(model: str) -> float:
    from cortana.models.embedded import BUNDLED_MODELS

    return BUNDLED_MODELS[model].check_purpose if model in BUNDLED_MODELS else 0.0


def _summary(cells: dict[str, list[int]]) -> dict[str, Any]:
    return {**{c: cells[c] for c in te.CATEGORIES}, "balanced": balanced(cells)}


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
        pieces = [
            pieces_of(answer, rows[answer.case.id], guided_rows[answer.case.id], tools, (scores, weights), margin)
            for answer in tj.answers(model, cases, tools)
        ]
        rule = Rule(te.shipped_margin(model), _shipped_purpose(model), judge=True, prose=True)
        tuned = Rule(*te.tune_rule(model, cases, tools), judge=True, prose=True)
        threshold = choose_pair_threshold([(p.case, rule.calls(p)) for p in pieces], scores)
        ablated = {
            split: {
                name: _summary(_cells([p for p in pieces if p.case.split == split], calls))
                for name, calls in ablations(rule, tuned, scores, threshold).items()
            }
            for split in ("dev", "held-out")
        }
        for piece in pieces:
            case = piece.case
            per_layer = layer_calls(piece, rule)
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
            "pair veto threshold (chosen on dev)": threshold,
            "purpose rule (chosen on dev)": {"m0": tuned.m0, "k": tuned.k},
            "shipped (catalogue)": {"m0": te.shipped_margin(model), "k": _shipped_purpose(model)},
            "ablations": ablated,
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
            f"\n{model} (check margin {found['check margin']}, purpose rule {found['purpose rule (chosen on dev)']},"
            f" shipped {found['shipped (catalogue)']},"
            f" pair veto {found['pair veto threshold (chosen on dev)']:.3f}); no-fit answers calling a name not"
            f" offered: {found['calls to names not offered (model alone, no-fit questions)']}"
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
            print(f"\n{model}, {split} half: the shipped rows, each without one part")
            table(
                ["rows", *RIGHT, *(f"{k} false" for k in te.NO_FIT), "balanced"],
                [
                    [name]
                    + [f"{cells[c][0]}/{cells[c][1]}" for c in RIGHT]
                    + [f"{cells[k][1] - cells[k][0]}/{cells[k][1]}" for k in te.NO_FIT]
                    + [f"{cells['balanced']:.3f}"]
                    for name, cells in found["ablations"][split].items()
                ],
            )


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

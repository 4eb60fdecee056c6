"""What separates a right call from a call on a question no offered tool answers? Signals, measured (issue 63).

On the calls the bundled models made (``bench/toolcall_eval.py``'s recorded
answers, the first call the grammar wrote, before the check), right calls of
single and choice questions against calls on each kind of no-fit question,
each signal's AUC on both halves:

- **check**: the model's own check (minus the described check's margin);
- **judge pair** / **judge question**: the tool judge's heads (out of fold
  on the development half; ``--new-negatives``: trained on the new kinds too);
- **arguments grounded**: the call's checkable arguments all in the question
  (``cortana.agent.grounding.is_fully_grounded``);
- **parameters named**: the share of the call's parameter names whose words
  the question uses (a BMI call's ``weight`` for "area of a triangle, base 10
  and height 5" is not named);
- **purpose words**: the words the question shares with the tool's name and
  description (stems of four letters or more, common words left out).

Then the combinations: a logistic regression over the check and each other
signal, trained on the development half (five folds by case for its own
scores), its threshold the one whose balanced score (harmonic mean of right
calls kept and false calls stopped) is best on the development half; the
held-out half is scored once. A signal that does not add to the check on the
held-out half does not ship.

    python bench/nofit_signals.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

import tool_judge as tj
import toolcall_eval as te
from cortana.agent.grounding import conversation_evidence, is_fully_grounded
from cortana.agent.judge import tool_text
from cortana.messages import Message
from cortana.models.guided import purpose_stems, purpose_words
from cortana.tools import SchemaTool
from report import RESULTS, save, table

SIGNALS = ("check", "judge pair", "judge question", "arguments grounded", "parameters named", "purpose words")


def signals(answer: tj.Answer, tools: dict[str, dict[str, Any]], scores: tj.Scores) -> dict[str, float]:
    """Each signal for the answer's first call."""
    case, call = answer.case, answer.calls[0]
    spec = tools[call.name]
    tool = SchemaTool(call.name, spec["description"], spec["parameters"], lambda **_: "ok")
    evidence = conversation_evidence([Message.user(case.prompt)])
    asked = purpose_stems(case.prompt)
    named = [name for name in call.arguments if name in spec["parameters"].get("properties", {})]
    return {
        "check": -float(answer.margin if answer.margin is not None else 0.0),
        "judge pair": scores.pair[(case.prompt, call.name)],
        "judge question": scores.question[case.prompt],
        "arguments grounded": float(is_fully_grounded(call, tool, evidence)),
        "parameters named": sum(bool(purpose_stems(name) & asked) for name in named) / max(1, len(named)),
        "purpose words": float(purpose_words(case.prompt, call.name, spec["description"])),
    }


def population(
    model: str, cases: list[te.Case], tools: dict[str, dict[str, Any]], scores: tj.Scores
) -> list[dict[str, Any]]:
    """The first calls the grammar wrote and the check was asked about: right ones (1) and no-fit ones (0)."""
    found = []
    for answer in tj.answers(model, cases, tools):
        case = answer.case
        if not answer.calls or answer.margin is None:
            continue  # no call, or one recovered from prose (not checked)
        if case.category in te.NO_FIT:
            label = 0
        elif case.category in ("single", "choice") and te.right(answer.calls, case.expected):
            label = 1
        else:
            continue
        found.append({"case": case, "label": label, **signals(answer, tools, scores)})
    return found


def _fold(case_id: str) -> int:
    return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % tj.FOLDS


def _matrix(rows: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[row[name] for name in names] for row in rows], dtype=np.float64)


def balanced(kept: list[bool], labels: list[int]) -> float:
    right = sum(k for k, y in zip(kept, labels, strict=True) if y) / max(1, sum(labels))
    stopped = sum(not k for k, y in zip(kept, labels, strict=True) if not y) / max(1, len(labels) - sum(labels))
    return 0.0 if right + stopped == 0 else 2 * right * stopped / (right + stopped)


def combination(dev: list[dict[str, Any]], held: list[dict[str, Any]], names: tuple[str, ...]) -> dict[str, Any]:
    """A logistic regression over ``names``: out-of-fold scores on the development half, a threshold chosen there."""
    y = np.array([row["label"] for row in dev])
    x = _matrix(dev, names)
    folds = np.array([_fold(row["case"].id) for row in dev])
    oof = np.zeros(len(dev))
    for k in range(tj.FOLDS):
        oof[folds == k] = tj.train(x[folds != k], y[folds != k], 1.0).logits(x[folds == k])
    candidates = sorted(set(oof))
    threshold = max(candidates, key=lambda t: balanced([s >= t for s in oof], list(y)))
    head = tj.train(x, y, 1.0)
    held_scores = head.logits(_matrix(held, names)) if held else np.zeros(0)
    held_y = [row["label"] for row in held]
    return {
        "dev AUC (out of fold)": tj.auc(list(oof), list(y)),
        "held-out AUC": tj.auc(list(held_scores), held_y),
        "dev: right kept, false stopped": _counts([s >= threshold for s in oof], list(y)),
        "held-out: right kept, false stopped": _counts([s >= threshold for s in held_scores], held_y),
        "held-out balanced": round(balanced([s >= threshold for s in held_scores], held_y), 3),
    }


def _counts(kept: list[bool], labels: list[int]) -> str:
    right = sum(k for k, y in zip(kept, labels, strict=True) if y)
    stopped = sum(not k for k, y in zip(kept, labels, strict=True) if not y)
    return f"{right}/{sum(labels)}, {stopped}/{len(labels) - sum(labels)}"


def shipped(rows: list[dict[str, Any]], margin: float | None) -> str:
    """The check as shipped: a call is kept when its margin is below the model's threshold."""
    kept = [margin is None or -row["check"] < margin for row in rows]
    return _counts(kept, [row["label"] for row in rows])


def measure(new_negatives: bool) -> dict[str, Any]:
    tools, cases = te.load_tools(), te.load_cases()
    texts = {name: tool_text(name, spec["description"]) for name, spec in {**tools, **tj.builtin_specs()}.items()}
    vectors = tj.Embeddings()
    asyncio.run(
        vectors.fill({c.prompt for c in cases} | {a.question for a in tj.build_questions(cases)}, set(texts.values()))
    )
    _, scores, _ = tj.train_all(cases, tools, vectors, texts, new_negatives)
    result: dict[str, Any] = {"new negatives": new_negatives, "models": {}}
    for model in tj.MODELS:
        rows = population(model, cases, tools, scores)
        found: dict[str, Any] = {"AUC": {}, "combinations": {}}
        for split in ("dev", "held-out"):
            half = [row for row in rows if row["case"].split == split]
            right = [row for row in half if row["label"]]
            for kind in (*te.NO_FIT, "all no-fit"):
                wrong = [row for row in half if not row["label"] and kind in (row["case"].category, "all no-fit")]
                labels = [1] * len(right) + [0] * len(wrong)
                found["AUC"][f"{split}, {kind} ({len(right)} right, {len(wrong)} no-fit)"] = {
                    name: tj.auc([row[name] for row in right + wrong], labels) for name in SIGNALS
                }
        dev = [row for row in rows if row["case"].split == "dev"]
        held = [row for row in rows if row["case"].split == "held-out"]
        margin = te.shipped_margin(model)
        found["shipped check: right kept, false stopped"] = {
            "dev": shipped(dev, margin),
            "held-out": shipped(held, margin),
        }
        for other in ("", *SIGNALS[1:]):
            names = ("check", other) if other else ("check",)
            found["combinations"][" + ".join(names)] = combination(dev, held, names)
        found["combinations"]["all"] = combination(dev, held, SIGNALS)
        result["models"][model] = found
    return result


def report(result: dict[str, Any]) -> None:
    for model, found in result["models"].items():
        print(f"\n{model}: AUC of each signal, right calls against calls on no-fit questions")
        table(
            ["half, kind", *SIGNALS],
            [[key, *(f"{v:.3f}" for v in aucs.values())] for key, aucs in found["AUC"].items()],
        )
        print(f"shipped check: {found['shipped check: right kept, false stopped']}")
        table(
            [
                "combination",
                "dev AUC (oof)",
                "held-out AUC",
                "dev kept/stopped",
                "held-out kept/stopped",
                "held-out balanced",
            ],
            [[name, *map(str, cells.values())] for name, cells in found["combinations"].items()],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-negatives", action="store_true", help="the judge trained on the new kinds too")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args.new_negatives)
    report(result)
    name = "nofit_signals_new_negatives.json" if args.new_negatives else "nofit_signals.json"
    save(args.json or RESULTS / name, result)


if __name__ == "__main__":
    main()

"""Every threshold of the guided tool-call check against the tool-call goals, on both halves.

The check (``cortana.models.guided``) turns a call away when log P(no) - log P(yes) reaches a
threshold; each bundled model ships the one its development half chose
(``BundledModel.check_margin``). This script scores the shipped setting of
``bench/toolcall_eval.py`` at every threshold from -3.0 to 0.0 (and with the check off), so
the whole trade-off between right calls kept and false calls stopped is on record, not only
the chosen point. It decides nothing: the shipped thresholds were chosen on the development
half before this was run, and the held-out columns are reported, never tuned on.

Goals (issue 13): 1.5B single and choice at least 90% right, parallel at least 50%, false
calls on no-fit questions at most 15%; 0.5B single at least 80%, false calls at most 25%.

    python bench/check_sweep.py            # both recorded models, a table per model and half
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import RESULTS, save, table
from toolcall_eval import SHIPPED, load_cases, load_tools, score, shipped_margin

GOALS: dict[str, dict[str, tuple[str, float]]] = {
    "qwen2.5-coder-1.5b": {
        "single": (">=", 0.9),
        "choice": (">=", 0.9),
        "parallel": (">=", 0.5),
        "nofit": ("<=", 0.15),
    },
    "qwen2.5-coder-0.5b": {"single": (">=", 0.8), "nofit": ("<=", 0.25)},
}
THRESHOLDS: list[float | None] = [round(-3.0 + 0.1 * step, 1) for step in range(31)] + [None]
"""``None``: the check never turns a call away (a threshold out of reach)."""
OFF = 1e9


def sweep(model: str) -> dict[str, Any]:
    """For each threshold and half: each goal's rate, whether it is met, and whether all of them are."""
    cases, tools = load_cases(), load_tools()
    points = []
    for threshold in THRESHOLDS:
        result = score(model, cases, tools, OFF if threshold is None else threshold)[SHIPPED]
        point: dict[str, Any] = {"threshold": threshold}
        for split in ("dev", "held-out"):
            cells = result[split]
            rates = {category: cells[category]["hits"] / cells[category]["n"] for category in GOALS[model]}
            met = {
                category: rate >= bound if op == ">=" else rate <= bound
                for category, rate in rates.items()
                for op, bound in [GOALS[model][category]]
            }
            point[split] = {"rates": rates, "met": met, "all met": all(met.values())}
        points.append(point)
    return {"model": model, "shipped": shipped_margin(model), "goals": GOALS[model], "points": points}


def show(result: dict[str, Any]) -> None:
    model, goals = result["model"], result["goals"]
    print(
        f"\n{model}: shipped threshold {result['shipped']}; goals "
        + ", ".join(f"{category} {op} {bound:.0%}" for category, (op, bound) in goals.items())
    )
    rows = []
    for point in result["points"]:
        label = "off" if point["threshold"] is None else f"{point['threshold']:.1f}"
        cells = []
        for split in ("dev", "held-out"):
            part = point[split]
            cells += [f"{part['rates'][c]:.0%}{'' if part['met'][c] else '*'}" for c in goals]
        rows.append([label, *cells])
    headers = ["threshold"] + [f"{split} {category}" for split in ("dev", "held-out") for category in goals]
    table(headers, rows)
    for split in ("dev", "held-out"):
        met = [p["threshold"] for p in result["points"] if p[split]["all met"]]
        print(f"{split}: every goal met at {met if met else 'no threshold'}   (* marks a goal missed)")


def main() -> None:
    results = [sweep(model) for model in GOALS]
    for result in results:
        show(result)
    save(RESULTS / "check_sweep.json", {"results": results})
    print(
        json.dumps(
            {r["model"]: {s: any(p[s]["all met"] for p in r["points"]) for s in ("dev", "held-out")} for r in results}
        )
    )


if __name__ == "__main__":
    main()

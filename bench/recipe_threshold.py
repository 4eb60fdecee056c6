"""The similarity over which a recipe's task matches a new prompt, measured, not guessed.

``bench/recipe_similarity_set`` holds (recipe TASK, later prompt, same?) pairs,
written by a helper session that saw neither this code nor the embedder: a
development half and a held-out half with different tasks. The threshold is
chosen on the development half only, as the one with the best F0.5 (precision
counts twice: a wrong recipe shown misleads a small model, a missed one only
costs the shortcut); the held-out half is then scored at that threshold.

The embedding is the one ``Experience`` uses: the prompt as a query, the task as
a passage, and (``--match task+origin``, what ``Experience`` does) the prompt the
recipe was learned from as a query too, a recipe's similarity being the higher
of the two. ``origins.json`` holds those original prompts, written by another
helper session that saw only the TASK lines (not the later prompts, the code or
the embedder).

    python bench/recipe_threshold.py [--embedder e5] [--match task|task+origin]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from pathlib import Path
from typing import Any

SET = Path(__file__).parent / "recipe_similarity_set"


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


async def similarities(
    pairs: list[dict[str, Any]], embedder: Any, origins: dict[str, str] | None = None
) -> list[tuple[float, float, bool]]:
    """Each pair's similarity to the task and to the original prompt (-1 without ``origins``), and its label."""
    tasks = sorted({p["task"] for p in pairs})
    task_vectors = dict(zip(tasks, await embedder.embed_passages(tasks), strict=True))
    origin_vectors = {task: await embedder.embed_query(origins[task]) for task in tasks} if origins else {}
    scored = []
    for pair in pairs:
        query = await embedder.embed_query(pair["prompt"])
        origin = _cosine(query, origin_vectors[pair["task"]]) if origins else -1.0
        scored.append((_cosine(query, task_vectors[pair["task"]]), origin, bool(pair["same"])))
    return scored


def shown(scored: list[tuple[float, float, bool]], task_t: float, origin_t: float) -> list[tuple[bool, bool]]:
    """Per pair (shown?, same?): shown when the task is at ``task_t``, or the original prompt at ``origin_t``."""
    return [(t >= task_t or o >= origin_t, same) for t, o, same in scored]


def scores(decided: list[tuple[bool, bool]]) -> dict[str, float]:
    """Precision, recall, F1 and F0.5 of the decisions."""
    tp = sum(1 for shown, same in decided if shown and same)
    fp = sum(1 for shown, same in decided if shown and not same)
    fn = sum(1 for shown, same in decided if not shown and same)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0

    def f(beta: float) -> float:
        b2 = beta * beta
        return (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall else 0.0

    return {"precision": precision, "recall": recall, "f1": f(1.0), "f05": f(0.5), "tp": tp, "fp": fp, "fn": fn}


GRID = [round(t / 100, 2) for t in range(50, 100)]
NEVER = 2.0
"""A threshold no cosine reaches: the original prompt is not used."""


def choose(scored: list[tuple[float, float, bool]], with_origin: bool) -> tuple[float, float]:
    """The (task, original prompt) thresholds with the best F0.5 on ``scored``; the higher one on a tie.

    In two steps: the task's threshold alone first (it is the one a recipe without an original prompt, an
    imported one, is matched by), then the original prompt's with the task's fixed.
    """

    def best(candidates: list[float], task: float | None) -> float:
        def key(t: float) -> tuple[float, float]:
            pair = (t, NEVER) if task is None else (task, t)
            return round(scores(shown(scored, *pair))["f05"], 6), t

        return max(candidates, key=key)

    task = best(GRID, None)
    return task, best([*GRID, NEVER], task) if with_origin else NEVER


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5", choices=["e5"])
    parser.add_argument("--match", default="task+origin", choices=["task", "task+origin"])
    parser.add_argument("--threshold", type=float, help="score at this task threshold instead of choosing one")
    parser.add_argument("--origin-threshold", type=float, default=NEVER, help="with --threshold: the prompt's")
    args = parser.parse_args()
    from cortana.memory.recall import E5Embedder

    embedder = E5Embedder()
    dev = json.loads((SET / "dev.json").read_text())
    held = json.loads((SET / "heldout.json").read_text())
    origins = json.loads((SET / "origins.json").read_text()) if args.match == "task+origin" else None
    dev_scored = await similarities(dev, embedder, origins["dev"] if origins else None)
    held_scored = await similarities(held, embedder, origins["heldout"] if origins else None)
    with_origin = origins is not None
    if args.threshold is not None:
        chosen = (args.threshold, args.origin_threshold if with_origin else NEVER)
        how = "given"
    else:
        chosen = choose(dev_scored, with_origin)
        how = "chosen on the development half"
    origin_text = f", original prompt {chosen[1]:.2f}" if with_origin else ""
    print(f"embedder {embedder.name}, match {args.match}: thresholds {how}: task {chosen[0]:.2f}{origin_text}")
    print("| half | pairs | same | precision | recall | F1 | F0.5 | shown wrongly |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, scored in (("development", dev_scored), ("held-out", held_scored)):
        s = scores(shown(scored, *chosen))
        positives = sum(same for _, _, same in scored)
        print(
            f"| {name} | {len(scored)} | {positives} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} | "
            f"{s['f05']:.2f} | {s['fp']} |"
        )
    for label, index in (("task", 0), ("original prompt", 1)):
        if index == 1 and not with_origin:
            continue
        same = [row[index] for row in dev_scored if row[2]]
        other = [row[index] for row in dev_scored if not row[2]]
        print(
            f"development similarity to the {label}: same {min(same):.3f}..{max(same):.3f} "
            f"(mean {sum(same) / len(same):.3f}), other {min(other):.3f}..{max(other):.3f} "
            f"(mean {sum(other) / len(other):.3f})"
        )


if __name__ == "__main__":
    asyncio.run(main())

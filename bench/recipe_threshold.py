"""The similarity over which a recipe's task matches a new prompt, measured, not guessed.

``bench/recipe_similarity_set`` holds (recipe TASK, later prompt, same?) pairs,
written by a helper session that saw neither this code nor the embedder: a
development half and a held-out half with different tasks. The threshold is
chosen on the development half only, as the one with the best F0.5 (precision
counts twice: a wrong recipe shown misleads a small model, a missed one only
costs the shortcut); the held-out half is then scored at that threshold.

The embedding is the one ``Experience`` uses: the prompt as a query, the task as
a passage.

    python bench/recipe_threshold.py [--embedder e5]
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


async def similarities(pairs: list[dict[str, Any]], embedder: Any) -> list[tuple[float, bool]]:
    """The cosine similarity of each pair, with its label."""
    tasks = sorted({p["task"] for p in pairs})
    task_vectors = dict(zip(tasks, await embedder.embed_passages(tasks), strict=True))
    scored = []
    for pair in pairs:
        query = await embedder.embed_query(pair["prompt"])
        scored.append((_cosine(query, task_vectors[pair["task"]]), bool(pair["same"])))
    return scored


def scores(scored: list[tuple[float, bool]], threshold: float) -> dict[str, float]:
    """Precision, recall, F1 and F0.5 of "similarity >= threshold" as the prediction."""
    tp = sum(1 for s, same in scored if s >= threshold and same)
    fp = sum(1 for s, same in scored if s >= threshold and not same)
    fn = sum(1 for s, same in scored if s < threshold and same)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0

    def f(beta: float) -> float:
        b2 = beta * beta
        return (1 + b2) * precision * recall / (b2 * precision + recall) if precision + recall else 0.0

    return {"precision": precision, "recall": recall, "f1": f(1.0), "f05": f(0.5), "tp": tp, "fp": fp, "fn": fn}


def choose(scored: list[tuple[float, bool]]) -> float:
    """The threshold (to two decimals) with the best F0.5 on ``scored``; the higher one on a tie."""
    best = max(
        (round(t / 100, 2) for t in range(50, 100)),
        key=lambda t: (round(scores(scored, t)["f05"], 6), t),
    )
    return best


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5", choices=["e5"])
    parser.parse_args()
    from cortana.memory.recall import E5Embedder

    embedder = E5Embedder()
    dev = json.loads((SET / "dev.json").read_text())
    held = json.loads((SET / "heldout.json").read_text())
    dev_scored = await similarities(dev, embedder)
    held_scored = await similarities(held, embedder)
    threshold = choose(dev_scored)
    print(f"embedder {embedder.name}: threshold chosen on the development half: {threshold:.2f}")
    print("| half | pairs | same | precision | recall | F1 | F0.5 | shown wrongly |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, scored in (("development", dev_scored), ("held-out", held_scored)):
        s = scores(scored, threshold)
        positives = sum(same for _, same in scored)
        print(
            f"| {name} | {len(scored)} | {positives} | {s['precision']:.2f} | {s['recall']:.2f} | {s['f1']:.2f} | "
            f"{s['f05']:.2f} | {s['fp']} |"
        )
    print("\nAround the threshold (held-out half, for the record; nothing is chosen on it):")
    for t in (threshold - 0.02, threshold - 0.01, threshold, threshold + 0.01, threshold + 0.02):
        s = scores(held_scored, t)
        print(f"  {t:.2f}: precision {s['precision']:.2f} recall {s['recall']:.2f} F0.5 {s['f05']:.2f}")
    same = [s for s, y in dev_scored if y]
    other = [s for s, y in dev_scored if not y]
    print(
        f"\ndevelopment similarities: same {min(same):.3f}..{max(same):.3f} (mean {sum(same) / len(same):.3f}), "
        f"other {min(other):.3f}..{max(other):.3f} (mean {sum(other) / len(other):.3f})"
    )


if __name__ == "__main__":
    asyncio.run(main())

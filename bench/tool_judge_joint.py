"""Tried for issue 44 and not shipped: the judge's pair head over one E5 embedding of question and tool together.

The shipped pair head (``bench/tool_judge.py``) reads the question's and the
tool's embeddings made apart (a bi-encoder), and separates the calls the
models made on no-fit questions from their right calls barely better than
chance (AUC 0.57-0.60), where the model's own check reaches 0.77-0.95. This
script asks whether reading them together helps: E5 embeds
``Question: ...\\nTool: name: description`` as one passage, and a logistic
regression is trained on that vector alone ("joint") and on it beside the
shipped features ("joint+pair"), with the same development half, folds and
choice of L2 as the shipped head; the held-out half is scored once.

    python bench/tool_judge_joint.py     # embeds ~3,100 pairs once (minutes here), cached in bench/results
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np

import tool_judge as tj
import toolcall_eval as te
from cortana.agent.judge import features, tool_text
from report import RESULTS, save

CACHE = RESULTS / "tool_judge_joint_embeddings.json"


def joint_text(question: str, tool: str) -> str:
    return f"Question: {question}\nTool: {tool}"


async def main() -> None:
    tools, cases = te.load_tools(), te.load_cases()
    texts = {name: tool_text(name, spec["description"]) for name, spec in {**tools, **tj.builtin_specs()}.items()}
    vectors = tj.Embeddings()
    await vectors.fill({a.question for a in tj.build_questions(cases)}, set(texts.values()))
    _, scores, _ = tj.train_all(cases, tools, vectors, texts)
    pairs = tj.build_pairs(cases, tools)
    cache: dict[str, list[float]] = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    need = sorted({(p.question, p.tool) for p in pairs} | set(scores.pair))
    todo = [key for key in need if joint_text(key[0], texts[key[1]]) not in cache]
    for start in range(0, len(todo), 32):
        chunk = [joint_text(q, texts[t]) for q, t in todo[start : start + 32]]
        for text, vector in zip(chunk, await vectors.embedder.embed_passages(chunk), strict=True):
            cache[text] = [round(x, 6) for x in vector]
    if todo:
        CACHE.write_text(json.dumps(cache))

    def row(question: str, tool: str, variant: str) -> np.ndarray:
        joint = tj.unit(np.asarray(cache[joint_text(question, texts[tool])], dtype=np.float64))
        if variant == "joint":
            return joint
        return np.concatenate([joint, features(vectors.query(question), vectors.passage(texts[tool]))])

    result: dict[str, Any] = {}
    dev = [p for p in pairs if p.split == "dev"]
    held = [p for p in pairs if p.split == "held-out"]
    for variant in ("joint", "joint+pair"):
        x_dev = np.stack([row(p.question, p.tool, variant) for p in dev])
        y_dev = np.array([p.label for p in dev])
        head, oof, by_l2 = tj.fit_head([p.group for p in dev], x_dev, y_dev)
        held_logits = head.logits(np.stack([row(p.question, p.tool, variant) for p in held]))
        new = tj.Scores()
        new.question = scores.question
        new.pair = {(p.question, p.tool): float(v) for p, v in zip(dev, oof, strict=True)}
        new.pair |= {(p.question, p.tool): float(v) for p, v in zip(held, held_logits, strict=True)}
        rest = [key for key in scores.pair if key not in new.pair]
        if rest:
            logits = head.logits(np.stack([row(*key, variant) for key in rest]))
            new.pair |= dict(zip(rest, map(float, logits), strict=True))
        cells: dict[str, Any] = {
            "l2 by out-of-fold AUC": by_l2,
            "pair AUC": {
                "dev (out of fold)": tj.auc(list(oof), list(y_dev)),
                "held-out": tj.auc(list(held_logits), [p.label for p in held]),
            },
        }
        for model in tj.MODELS:
            recorded = tj.answers(model, cases, tools)
            cells[model] = {"this head": tj.called_auc(recorded, new), "shipped": tj.called_auc(recorded, scores)}
        result[variant] = cells
        print(variant, json.dumps(cells, indent=1))
    save(RESULTS / "tool_judge_joint.json", result)


if __name__ == "__main__":
    asyncio.run(main())

"""Train and score the tool judge: is a question one a tool is for, and does an offered tool fit it? (issue 44)

The judge (``cortana.agent.judge``) is two logistic regressions over the E5
embeddings Cortana computes in-process; it costs no model call:

- the **question head** (the question's embedding alone): a question a tool
  is for, or one answered from what the model knows ("What is a mutex?");
- the **pair head** (question and tool, "name as words: description", as
  their element-wise product, absolute difference and cosine): does this
  tool fit this question?

**Training sets**, development halves only:

- question head: every question of ``bench/toolcall_set`` (all categories:
  even a no-fit question asks for something a tool would do) and of
  ``bench/judge_set/workspace.jsonl`` is one a tool is for; every question of
  ``bench/judge_set/general.jsonl`` (general knowledge, chat, writing,
  asked in a code folder) is not;
- pair head: in ``bench/toolcall_set`` the expected tools of every single,
  choice, parallel and multistep case fit; the other offered tools of single,
  choice and parallel cases do not (the Hammer way: the right tool removed
  from what is offered), nor does any tool offered to a no-fit case (tools
  that look close and share words with the question); the built-in tools that
  answer a workspace question fit it; for a general question no built-in tool
  fits, nor do the four tools of the tool-call set that share most words with it.

Every set is split once: within each file and category every second id in
SHA-256 order is held out. Regularization and thresholds are chosen on the
development half, on out-of-fold scores (five folds by case: no case is
scored by a head that saw it); the held-out half is scored once, by heads
trained on the whole development half. The veto threshold keeps 99% of the
development half's tool questions; the pair head's "fits" is a logit of 0.

**Scores**, on ``bench/toolcall_eval.py``'s recorded answers (offline) for
both models: right calls (single, choice, parallel), false calls on no-fit
questions, and their harmonic mean (right-call rate with abstention rate),
for the shipped check alone and with the judge; and on the judge set's
questions: general questions on which the judge allows no built-in tool,
and workspace questions whose right tool it allows and says fits.

    python bench/tool_judge.py            # train, write the shipped weights, score both halves
    python bench/tool_judge.py --no-write # score only
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import toolcall_eval as te
from cortana.agent.judge import WEIGHTS_PATH, Head, JudgeWeights, features, tool_text, unit
from cortana.memory.recall import E5Embedder
from report import RESULTS, save, table

JUDGE_SET = Path(__file__).resolve().parent / "judge_set"
CACHE = RESULTS / "tool_judge_embeddings.json"
MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
FOLDS = 5
L2_CHOICES = (0.3, 1.0, 3.0, 10.0, 30.0)
KEEP = 0.99
"""The share of the development half's tool questions the veto threshold keeps (out of fold)."""
RECOVER = 0.0
"""The pair head's logit from which a tool fits: "fits" rather than "does not" (classes weighted equally)."""
NEW_KINDS = ("unrelated", "samefield", "general")
"""The no-fit kinds of ``cases_c.jsonl`` (issue 63): trained on only with ``--new-negatives`` (the shipped
weights were trained without them); otherwise scored by the final heads, on both halves."""
SCORED = ("single", "choice", "parallel")
"""The categories whose right calls the one score counts (multistep is reported, not scored: its later steps blur)."""


@dataclass(frozen=True)
class Pair:
    question: str
    tool: str
    label: int
    group: str  # the case it came from: folds split by it
    split: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _held_out(ids: list[str]) -> set[str]:
    return set(sorted(ids, key=_digest)[1::2])


def builtin_specs() -> dict[str, dict[str, Any]]:
    """The built-in tools as the assistant offers them: name -> {description, parameters}."""
    from cortana.tools.builtin import builtin_tools

    return {
        tool.name: {"description": tool.spec.description, "parameters": tool.spec.parameters}
        for tool in builtin_tools(Path("."))
    }


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"[a-z]{3,}", text.lower().replace("_", " "))}


def build_pairs(cases: list[te.Case], tools: dict[str, dict[str, Any]], new_negatives: bool = False) -> list[Pair]:
    """Every (question, tool, fits) pair of both halves; only the development half's are trained on.

    ``new_negatives``: the tools offered to the new no-fit kinds do not fit their questions.
    """
    pairs: list[Pair] = []
    builtin = builtin_specs()
    for case in cases:
        if case.category in NEW_KINDS:
            if new_negatives:
                pairs.extend(Pair(case.prompt, name, 0, case.id, case.split) for name in case.tools)
            continue
        expected = {call["name"] for call in case.expected}
        for name in case.tools:
            if name in expected:
                pairs.append(Pair(case.prompt, name, 1, case.id, case.split))
            elif case.category != "multistep":  # a later step of a chain may fit too: not a clean negative
                pairs.append(Pair(case.prompt, name, 0, case.id, case.split))
    for row in load_rows("workspace.jsonl"):
        pairs.extend(Pair(row["prompt"], name, 1, row["id"], row["split"]) for name in row["tools"])
    catalogue = {name: _words(name + " " + spec["description"]) for name, spec in tools.items() if name not in builtin}
    for row in load_rows("general.jsonl"):
        pairs.extend(Pair(row["prompt"], name, 0, row["id"], row["split"]) for name in builtin)
        words = _words(row["prompt"])
        sharing = sorted(catalogue, key=lambda name: (-len(words & catalogue[name]), name))[:4]
        pairs.extend(Pair(row["prompt"], name, 0, row["id"], row["split"]) for name in sharing)
    return pairs


class Embeddings:
    """E5 vectors of questions (as queries) and tools (as passages), cached in a file between runs."""

    def __init__(self) -> None:
        self.embedder = E5Embedder(threads=2)
        self.cache: dict[str, list[float]] = json.loads(CACHE.read_text()) if CACHE.exists() else {}

    async def fill(self, questions: set[str], passages: set[str]) -> None:
        todo_q = sorted(q for q in questions if "q:" + q not in self.cache)
        for question in todo_q:
            self.cache["q:" + question] = await self.embedder.embed_query(question)
        todo_p = sorted(p for p in passages if "p:" + p not in self.cache)
        for start in range(0, len(todo_p), 16):
            chunk = todo_p[start : start + 16]
            for text, vector in zip(chunk, await self.embedder.embed_passages(chunk), strict=True):
                self.cache["p:" + text] = vector
        if todo_q or todo_p:
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            CACHE.write_text(json.dumps({k: [round(x, 6) for x in v] for k, v in self.cache.items()}))

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self.cache["q:" + text], dtype=np.float32)

    def passage(self, text: str) -> np.ndarray:
        return np.asarray(self.cache["p:" + text], dtype=np.float32)


def matrix(pairs: list[Pair], vectors: Embeddings, texts: dict[str, str]) -> np.ndarray:
    return np.stack([features(vectors.query(p.question), vectors.passage(texts[p.tool])) for p in pairs])


def load_rows(name: str) -> list[dict[str, Any]]:
    """A judge-set file's rows, each with its ``split``."""
    rows = [json.loads(line) for line in (JUDGE_SET / name).read_text().splitlines() if line.strip()]
    held = _held_out([row["id"] for row in rows])
    return [row | {"split": "held-out" if row["id"] in held else "dev"} for row in rows]


@dataclass(frozen=True)
class Asked:
    question: str
    label: int  # 1: a question a tool is for
    group: str
    split: str


def build_questions(cases: list[te.Case], new_negatives: bool = False) -> list[Asked]:
    """The question head's rows: a question a tool is for (1) or not (0).

    Every question of the tool-call set asks for what a tool does, even a no-fit one, except the
    general questions of the new kinds; those kinds are rows only with ``new_negatives``.
    """
    asked = [
        Asked(c.prompt, int(c.category != "general"), c.id, c.split)
        for c in cases
        if new_negatives or c.category not in NEW_KINDS
    ]
    asked += [Asked(r["prompt"], 1, r["id"], r["split"]) for r in load_rows("workspace.jsonl")]
    asked += [Asked(r["prompt"], 0, r["id"], r["split"]) for r in load_rows("general.jsonl")]
    return asked


def train(x: np.ndarray, y: np.ndarray, l2: float) -> Head:
    """Logistic regression (Newton's method, L2 on the weights, not the bias), both classes weighted equally."""
    n, d = x.shape
    positive = y.mean()
    weight = np.where(y == 1, 0.5 / positive, 0.5 / (1 - positive))
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = np.hstack([(x - mean) / scale, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.full(d + 1, l2 * n / 100)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(z @ w)))
        gradient = z.T @ (weight * (p - y)) + penalty * w
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return Head(mean=mean, scale=scale, coef=w[:-1], bias=float(w[-1]))


def auc(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(float(wins / (len(pos) * len(neg))), 3)


def out_of_fold(groups: list[str], x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """Each development row scored by a head trained on the folds its case is not in."""
    fold = np.array([int(_digest(group)[:8], 16) % FOLDS for group in groups])
    scores = np.zeros(len(groups))
    for k in range(FOLDS):
        scores[fold == k] = train(x[fold != k], y[fold != k], l2).logits(x[fold == k])
    return scores


def fit_head(groups: list[str], x: np.ndarray, y: np.ndarray) -> tuple[Head, np.ndarray, dict[str, float]]:
    """The head trained on the whole development half at the L2 with the best out-of-fold AUC; its OOF scores."""
    by_l2 = {l2: auc(list(out_of_fold(groups, x, y, l2)), list(y)) for l2 in L2_CHOICES}
    l2 = max(by_l2, key=lambda k: by_l2[k])
    return train(x, y, l2), out_of_fold(groups, x, y, l2), {str(k): v for k, v in by_l2.items()} | {"chosen": l2}


class Scores:
    """Every question's question-head logit and every (question, tool) pair logit: out of fold on the
    development half, from the final heads on the held-out half."""

    def __init__(self) -> None:
        self.question: dict[str, float] = {}
        self.pair: dict[tuple[str, str], float] = {}

    def fit(self, weights: JudgeWeights, question: str, tools: list[str]) -> tuple[set[str], set[str]]:
        """What the judge allows and what it says fits, as ``ToolJudge.assess`` decides."""
        general = self.question[question] < weights.veto
        fitting = {t for t in tools if self.pair[(question, t)] >= weights.recover}
        return (fitting if general else set(tools)), (set() if general else fitting)


def train_all(
    cases: list[te.Case],
    tools: dict[str, dict[str, Any]],
    vectors: Embeddings,
    texts: dict[str, str],
    new_negatives: bool = False,
) -> tuple[JudgeWeights, Scores, dict[str, Any]]:
    questions, pairs = build_questions(cases, new_negatives), build_pairs(cases, tools, new_negatives)
    scores, about = Scores(), {}
    # The question head.
    dev = [a for a in questions if a.split == "dev"]
    held = [a for a in questions if a.split == "held-out"]
    x_dev = np.stack([unit(vectors.query(a.question)) for a in dev])
    y_dev = np.array([a.label for a in dev])
    question_head, oof, by_l2 = fit_head([a.group for a in dev], x_dev, y_dev)
    veto = float(np.sort(oof[y_dev == 1])[int((1 - KEEP) * int(y_dev.sum()))])
    held_logits = question_head.logits(np.stack([unit(vectors.query(a.question)) for a in held]))
    scores.question |= {a.question: float(v) for a, v in zip(dev, oof, strict=True)}
    scores.question |= {a.question: float(v) for a, v in zip(held, held_logits, strict=True)}
    unasked = sorted({c.prompt for c in cases} - set(scores.question))  # the new kinds, when not trained on
    if unasked:
        logits = question_head.logits(np.stack([unit(vectors.query(q)) for q in unasked]))
        scores.question |= dict(zip(unasked, map(float, logits), strict=True))
    about["question head"] = {
        "rows": {"dev": len(dev), "held-out": len(held)},
        "l2 by out-of-fold AUC": by_l2,
        "AUC": {
            "dev (out of fold)": auc(list(oof), list(y_dev)),
            "held-out": auc(list(held_logits), [a.label for a in held]),
        },
    }
    # The pair head.
    dev_p = [p for p in pairs if p.split == "dev"]
    held_p = [p for p in pairs if p.split == "held-out"]
    x_dev = matrix(dev_p, vectors, texts)
    y_dev = np.array([p.label for p in dev_p])
    pair_head, oof, by_l2 = fit_head([p.group for p in dev_p], x_dev, y_dev)
    held_logits = pair_head.logits(matrix(held_p, vectors, texts))
    scores.pair |= {(p.question, p.tool): float(v) for p, v in zip(dev_p, oof, strict=True)}
    scores.pair |= {(p.question, p.tool): float(v) for p, v in zip(held_p, held_logits, strict=True)}
    # Pairs no set labels (a multistep case's other steps, a general question's other tools): the final head.
    missing = [(c.prompt, name) for c in cases for name in c.tools if (c.prompt, name) not in scores.pair]
    missing += [(r["prompt"], name) for r in load_rows("workspace.jsonl") for name in builtin_specs()]
    missing = [key for key in dict.fromkeys(missing) if key not in scores.pair]
    x_missing = np.stack([features(vectors.query(q), vectors.passage(texts[t])) for q, t in missing])
    scores.pair |= dict(zip(missing, map(float, pair_head.logits(x_missing)), strict=True))
    about["pair head"] = {
        "rows": {"dev": len(dev_p), "held-out": len(held_p), "dev fitting": int(y_dev.sum())},
        "l2 by out-of-fold AUC": by_l2,
        "AUC": {
            "dev (out of fold)": auc(list(oof), list(y_dev)),
            "held-out": auc(list(held_logits), [p.label for p in held_p]),
        },
    }
    weights = JudgeWeights(question_head, pair_head, veto=veto, recover=RECOVER)
    about["thresholds"] = {"veto": round(veto, 3), "recover": RECOVER}
    return weights, scores, about


@dataclass
class Answer:
    """One case's first tool round as recorded: the calls the shipped path would run before any check.

    ``described``: for a prose answer that names offered tools, each named tool with the calls the
    grammar wrote for it (where the recording holds them: the decision's path or the free answer's)
    and whether the model's check let them through.
    """

    case: te.Case
    calls: list[Any]  # ToolCall, executed (offered, valid)
    margin: float | None  # the described check's margin; None: the call came from text recovery (no check)
    described: list[tuple[str, list[Any], bool]]


def answers(model: str, cases: list[te.Case], tools: dict[str, dict[str, Any]]) -> list[Answer]:
    """The calls the shipped path would run with the check switched off, and the check's margin on them."""
    from cortana.models.base import ToolSpec
    from cortana.models.guided import CallOpening, named_tools
    from cortana.tools import SchemaTool

    rows = te._rows(te.OUTPUTS / f"{model}.jsonl")
    guided_rows = te._rows(te.OUTPUTS / f"{model}.guided.jsonl")
    margin = te.shipped_margin(model)
    found = []
    for case in cases:
        specs = [ToolSpec(name, tools[name]["description"], tools[name]["parameters"]) for name in case.tools]
        offered = {s.name: SchemaTool(s.name, s.description, s.parameters, lambda **_: "ok") for s in specs}
        if case.id not in rows or case.id not in guided_rows:
            continue  # not recorded for this model yet
        row, guided = rows[case.id], guided_rows[case.id]
        unchecked = te.guided_settings(case, row, guided, specs, offered, margin=1e9)[te.SHIPPED]
        run = te.executed(unchecked, offered)
        opening = CallOpening(case.tools)
        opening.feed(row.get("content") or "")
        check = (guided["paths"].get(opening.tool) or {}).get("check_described") if opening.tool else None
        described = []
        if opening.tool is None and not run:
            for name in named_tools(row.get("content") or "", case.tools):
                path = guided["paths"].get(name) or {}
                written = [
                    te.ToolCall(id=f"d{i}", name=c["name"], arguments=c["arguments"] or {})
                    for i, c in enumerate(path.get("calls") or [])
                ]
                # The described check where recorded; else the check that showed the calls alone, at its margin.
                verdict = path.get("check_described") or path.get("check")
                plain = te.PLAIN_CHECK_MARGIN.get(model)
                passes = bool(verdict) and (
                    verdict["margin"] < margin
                    if "check_described" in path and margin is not None
                    else verdict.get("ok", False)
                    if plain is None
                    else verdict["margin"] < plain
                )
                if written:
                    described.append((name, te.executed(written, offered), passes))
        found.append(Answer(case, run, check["margin"] if check else None, described))
    return found


def outcome(answer: Answer, run: list[Any]) -> tuple[str, bool]:
    """The case's category and whether it came out right with ``run`` run."""
    if answer.case.category in te.NO_FIT:
        return answer.case.category, not run
    return answer.case.category, te.right(run, answer.case.expected)


def summary(results: list[tuple[str, bool]]) -> dict[str, Any]:
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for category, ok in results:
        cells[category][0] += ok
        cells[category][1] += 1
    right = sum(cells[c][0] for c in SCORED) / max(1, sum(cells[c][1] for c in SCORED))
    abstain = cells["nofit"][0] / max(1, cells["nofit"][1])
    harmonic = 0.0 if right + abstain == 0 else 2 * right * abstain / (right + abstain)
    kinds = {
        kind: round(2 * right * (cells[kind][0] / cells[kind][1]) / (right + cells[kind][0] / cells[kind][1]), 3)
        if cells[kind][1] and right + cells[kind][0]
        else 0.0
        for kind in te.NO_FIT
    }
    return {
        **{c: {"hits": cells[c][0], "n": cells[c][1]} for c in te.CATEGORIES},
        "harmonic by kind": kinds,
        "false calls": cells["nofit"][1] - cells["nofit"][0],
        "right rate": round(right, 3),
        "abstention": round(abstain, 3),
        "harmonic": round(harmonic, 3),
    }


WAYS = ("check", "check + judge")


def ways(answer: Answer, weights: JudgeWeights, scores: Scores, margin: float | None) -> dict[str, list[Any]]:
    """The calls that run: with the shipped check alone, and with the check and the judge.

    With the judge, a call of a tool it does not allow is turned away, and a prose answer that names a
    tool it says fits gets the call the grammar wrote for that tool, if the check lets it through.
    """
    allowed, fitting = scores.fit(weights, answer.case.prompt, answer.case.tools)
    if not answer.calls:
        made = next(((calls, passes) for name, calls, passes in answer.described if name in fitting), None)
        return {"check": [], "check + judge": made[0] if made and made[1] else []}
    checked = answer.margin is None or margin is None or answer.margin < margin
    return {
        "check": answer.calls if checked else [],
        "check + judge": answer.calls if checked and answer.calls[0].name in allowed else [],
    }


def called_auc(recorded: list[Answer], scores: Scores) -> dict[str, Any]:
    """How well each score separates the model's right calls from its calls on no-fit questions.

    Over the calls the model made (single and choice cases it got right, no-fit cases it called on;
    text-recovered calls, which have no check, left out): the question head, the pair head and the check.
    """
    found: dict[str, Any] = {}
    for split in ("dev", "held-out"):
        question, pair, check, labels = [], [], [], []
        for a in recorded:
            if a.case.split != split or not a.calls or a.margin is None:
                continue
            if a.case.category in te.NO_FIT:
                label = 0
            elif a.case.category in ("single", "choice") and te.right(a.calls, a.case.expected):
                label = 1
            else:
                continue
            question.append(scores.question[a.case.prompt])
            pair.append(scores.pair[(a.case.prompt, a.calls[0].name)])
            check.append(-a.margin)
            labels.append(label)
        found[split] = {
            "question head": auc(question, labels),
            "pair head": auc(pair, labels),
            "check": auc(check, labels),
            "n": len(labels),
        }
    return found


def workspace_questions(weights: JudgeWeights, scores: Scores) -> dict[str, Any]:
    """On the judge set: general questions with no built-in tool allowed; workspace questions whose right tool is
    allowed, and whose right tool fits (a prose answer naming it would get the call)."""
    builtin = list(builtin_specs())
    found: dict[str, Any] = {}
    for split in ("dev", "held-out"):
        general = [r for r in load_rows("general.jsonl") if r["split"] == split]
        workspace = [r for r in load_rows("workspace.jsonl") if r["split"] == split]
        vetoed = sum(not scores.fit(weights, r["prompt"], builtin)[0] for r in general)
        allowed = sum(bool(set(r["tools"]) & scores.fit(weights, r["prompt"], builtin)[0]) for r in workspace)
        fitting = sum(bool(set(r["tools"]) & scores.fit(weights, r["prompt"], builtin)[1]) for r in workspace)
        found[split] = {
            "general: no tool allowed": f"{vetoed}/{len(general)}",
            "workspace: right tool allowed": f"{allowed}/{len(workspace)}",
            "workspace: right tool fits": f"{fitting}/{len(workspace)}",
        }
    return found


def evaluate(write: bool, new_negatives: bool = False) -> dict[str, Any]:
    tools, cases = te.load_tools(), te.load_cases()
    texts = {name: tool_text(name, spec["description"]) for name, spec in {**tools, **builtin_specs()}.items()}
    vectors = Embeddings()
    everything = {c.prompt for c in cases} | {a.question for a in build_questions(cases)}
    asyncio.run(vectors.fill(everything, set(texts.values())))
    weights, scores, result = train_all(cases, tools, vectors, texts, new_negatives)
    result["models"] = {}
    for model in MODELS:
        recorded = answers(model, cases, tools)
        margin = te.shipped_margin(model)
        cells: dict[str, Any] = {"check margin": margin}
        for split in ("dev", "held-out"):
            per_way: dict[str, list[tuple[str, bool]]] = defaultdict(list)
            for a in (a for a in recorded if a.case.split == split):
                for way, run in ways(a, weights, scores, margin).items():
                    per_way[way].append(outcome(a, run))
            cells[split] = {way: summary(results) for way, results in per_way.items()}
        cells["AUC on the calls it made"] = called_auc(recorded, scores)
        cells["prose naming a tool"] = {
            a.case.id: [name for name, _, _ in a.described] for a in recorded if a.described
        }
        result["models"][model] = cells
    result["judge set"] = workspace_questions(weights, scores)
    result["judge ms"] = asyncio.run(time_judge(weights))
    if write:
        weights.save(WEIGHTS_PATH, trained_on="bench/tool_judge.py, development halves")
        result["weights"] = str(WEIGHTS_PATH.relative_to(Path(__file__).resolve().parents[1]))
    return result


async def time_judge(weights: JudgeWeights) -> dict[str, float]:
    """What the judge costs a turn: embedding the question (tools are embedded once per process), both heads."""
    from cortana.agent.judge import ToolJudge
    from cortana.models.base import ToolSpec

    judge = ToolJudge(weights=weights)
    specs = [ToolSpec(name, spec["description"], spec["parameters"]) for name, spec in builtin_specs().items()]
    await judge.assess("warm up", specs)
    seconds = []
    for question in ("What is a mutex? One sentence.", "List the files in this folder.", "Run the tests please."):
        for repeat in range(7):
            started = time.perf_counter()
            await judge.assess(question + "?" * repeat, specs)  # a new question each time: nothing cached
            seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {"median ms": round(1000 * seconds[len(seconds) // 2], 1), "max ms": round(1000 * seconds[-1], 1)}


def report(result: dict[str, Any]) -> None:
    for head in ("question head", "pair head"):
        print(f"{head}: {result[head]}")
    print(f"thresholds {result['thresholds']}; judge {result['judge ms']}")
    for model, cells in result["models"].items():
        print(f"{model}: AUC on the calls it made (right vs no-fit): {cells['AUC on the calls it made']}")
    print(f"judge set: {result['judge set']}")
    for split in ("dev", "held-out"):
        print(f"\n{split} half: right calls, false calls on no-fit questions, and the harmonic mean")
        rows = []
        for model, cells in result["models"].items():
            for way in WAYS:
                s = cells[split][way]
                rows.append(
                    [f"{model} / {way}"]
                    + [f"{s[c]['hits']}/{s[c]['n']}" for c in ("single", "choice", "parallel", "multistep")]
                    + [f"{s['false calls']}/{s['nofit']['n']} ({s['false calls'] / max(1, s['nofit']['n']):.0%})"]
                    + [f"{s['harmonic']:.3f}"]
                    + [
                        f"{s[k]['n'] - s[k]['hits']}/{s[k]['n']} ({s['harmonic by kind'][k]:.3f})" if s[k]["n"] else "-"
                        for k in NEW_KINDS
                    ]
                )
        table(
            ["model / judging", "single", "choice", "parallel", "multistep", "false calls", "harmonic"]
            + [f"{k}: false (harmonic)" for k in NEW_KINDS],
            rows,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="score only; leave the shipped weights as they are")
    parser.add_argument(
        "--new-negatives",
        action="store_true",
        help="train on the development half of the new no-fit kinds too (cases_c.jsonl, issue 63)",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "tool_judge.json")
    args = parser.parse_args()
    result = evaluate(write=not args.no_write, new_negatives=args.new_negatives)
    report(result)
    save(args.json, result)


if __name__ == "__main__":
    main()

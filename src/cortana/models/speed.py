"""How fast this machine runs a model: measured once on a bundled model, predicted for the others.

A model's size in memory is not what decides whether it is usable here; its speed is. Generating is bound by
memory bandwidth, so a model's tokens per second scale with the inverse of the weights each token reads (the file;
for a mixture of experts, only its active share of it); reading a prompt is bound by arithmetic, so it scales with
the inverse of the parameters each token runs through (a mixture of experts' active ones). One measurement of a
bundled model (a prompt read and an answer written, on the embedded engine, by llama.cpp's own timings) is enough
to predict every model of the catalogue, and with it the time of a typical fix: ``FIX_PROMPT`` tokens read and
``FIX_SAMPLES`` samples of ``FIX_SAMPLE_TOKENS`` written. The measurement is kept in the cache folder, keyed by the
machine's processor, its cores and the engine's build, and taken again when any of them changes.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cortana.config import cache_dir
from cortana.errors import ModelError
from cortana.messages import Message
from cortana.models.base import ModelRequest, ModelSettings
from cortana.models.catalogue import (
    CATALOGUE,
    HEADROOM,
    CatalogueModel,
    downloaded,
    machine_memory,
    memory_estimate,
)
from cortana.models.embedded import EmbeddedClient, engine_build, installed_models
from cortana.models.engine_process import SAMPLE_SLOTS

__all__ = [
    "FIX_PROMPT",
    "FIX_SAMPLES",
    "FIX_SAMPLE_TOKENS",
    "Speed",
    "active_parameters",
    "fix_seconds",
    "measured_speed",
    "parameters",
    "predict",
    "remember",
    "speed_of",
    "stronger_model",
]

FIX_PROMPT = 1_500
"""Tokens a typical fix's prompt has (the failing tests, the code of three locations)."""
FIX_SAMPLES = 8
FIX_SAMPLE_TOKENS = 200
"""A typical fix's samples, and each one's tokens (a function written again)."""
MEASURE_TOKENS = 64
"""Tokens each answer of the measurement writes."""
_PARAMETERS = re.compile(r"(\d+(?:\.\d+)?)\s*[bB]\b")
_FILE = "machine-speed.json"


@dataclass(frozen=True, slots=True)
class Speed:
    """Tokens per second of one model on this machine.

    Attributes:
        model: the catalogue name it is for.
        prompt_per_second: tokens read per second.
        generate_per_second: tokens written per second.
        measured: True for a measurement, False for a prediction from one.
        together_per_second: tokens written per second over several answers to one prompt decoded together in
            the engine's slots (what the fix workflow's samples get); 0: not measured.
    """

    model: str
    prompt_per_second: float
    generate_per_second: float
    measured: bool = False
    together_per_second: float = 0.0

    @property
    def samples_per_second(self) -> float:
        """Tokens per second written over several answers decoded together (one answer's rate when unknown)."""
        return max(self.together_per_second, self.generate_per_second)


def parameters(model: CatalogueModel) -> float | None:
    """A model's parameters in billions: the catalogue's figure, else read from its name or title
    (``qwen2.5-coder-1.5b``: 1.5)."""
    if model.billions:
        return model.billions
    for text in (model.name, model.title):
        found = _PARAMETERS.search(text.replace("-", " "))
        if found:
            return float(found[1])
    return None


def active_parameters(model: CatalogueModel) -> float | None:
    """The billions of parameters one token runs through: a mixture of experts' active ones, else all of them."""
    return model.active or parameters(model)


def predict(model: CatalogueModel, measured: Speed, reference: CatalogueModel) -> Speed | None:
    """``model``'s speed from ``measured`` (of ``reference``): generating by the weights a token reads (a mixture
    of experts' active share of its file), reading by the parameters a token runs through (its active ones).

    A mixture of experts with some 3B active decodes on a CPU at about a dense 3B's speed when the machine holds
    all of it (issue 66: 10.6 against 11.8 tokens/s on an i7-8700), so its file's size alone would predict it
    some ten times too slow.
    """
    wanted, known = active_parameters(model), active_parameters(reference)
    if not wanted or not known or not model.size or not reference.size:
        return None
    writing = reference.decode_bytes / model.decode_bytes
    return Speed(
        model.name,
        prompt_per_second=measured.prompt_per_second * known / wanted,
        generate_per_second=measured.generate_per_second * writing,
        together_per_second=measured.together_per_second * writing,
    )


def speed_of(model: CatalogueModel, measured: Speed) -> Speed | None:
    """``model``'s speed here: the measurement itself for the model measured, else predicted from it (None when the
    measured model is not in the catalogue or a size is unknown)."""
    if model.name == measured.model:
        return measured
    reference = CATALOGUE.get(measured.model)
    return predict(model, measured, reference) if reference is not None else None


def fix_seconds(speed: Speed) -> float:
    """A typical fix's model time at ``speed``: its prompt read once, its samples written."""
    return FIX_PROMPT / speed.prompt_per_second + FIX_SAMPLES * FIX_SAMPLE_TOKENS / speed.samples_per_second


def machine_key() -> str:
    """What a measurement holds for: the processor, its cores, and the engine's build."""
    processor = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        processor = names[0] if names else processor
    except OSError:
        pass
    return f"{processor}|{os.cpu_count()}|{engine_build()}"


def measured_speed(path: Path | None = None) -> Speed | None:
    """The measurement kept for this machine (None when there is none, or it was taken on another)."""
    try:
        data: Any = json.loads((path or cache_dir() / _FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("machine") != machine_key():
        return None
    try:
        return Speed(
            str(data["model"]),
            float(data["prompt_per_second"]),
            float(data["generate_per_second"]),
            measured=True,
            together_per_second=float(data.get("together_per_second") or 0),
        )
    except (KeyError, TypeError, ValueError):
        return None


def remember(speed: Speed, path: Path | None = None) -> None:
    """Keep ``speed`` as this machine's measurement."""
    target = path or cache_dir() / _FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({**asdict(speed), "machine": machine_key(), "when": time.time()}), encoding="utf-8")


async def measure(model: str = "qwen2.5-coder-0.5b") -> Speed:
    """Measure ``model`` (a bundled one) on the embedded engine, by llama.cpp's own timings: a prompt of some 600
    tokens read and 64 tokens written, then :data:`~cortana.models.engine_process.SAMPLE_SLOTS` answers of 64 tokens
    decoded together (the fix workflow's hot samples)."""
    text = Path(__file__).with_name("catalogue.py").read_text(encoding="utf-8")[:2400]
    async with await EmbeddedClient.start(model, samples=SAMPLE_SLOTS) as client:
        body = {"prompt": text, "n_predict": MEASURE_TOKENS, "ignore_eos": True, "temperature": 0}
        data = await client.http.request_json("POST", "/completion", json_body={**body, "cache_prompt": False})
        timings = data.get("timings") if isinstance(data, dict) else None
        if not isinstance(timings, dict):
            raise ModelError(f"the embedded engine at {client.base_url} gave no timings to measure with")
        reading = float(timings.get("prompt_per_second") or 0)
        writing = float(timings.get("predicted_per_second") or 0)
        if reading <= 0 or writing <= 0:
            raise ModelError(f"the embedded engine's timings cannot be measured with: {timings}")
        settings = ModelSettings(temperature=0.8, seed=1, max_tokens=MEASURE_TOKENS, extra={"ignore_eos": True})
        question = ModelRequest([Message.user("Write a Python function that sorts a list of words.")], [], settings)
        started = time.perf_counter()
        answers = await client.complete_many(question, SAMPLE_SLOTS)
        took = time.perf_counter() - started
    written = sum(answer.usage.completion_tokens for answer in answers) or SAMPLE_SLOTS * MEASURE_TOKENS
    together = written / max(took - 30 / reading, 1e-3)  # its prompt (some 30 tokens) read first
    return Speed(model, reading, writing, measured=True, together_per_second=max(together, writing))


def stronger_model(in_use: str, budget_seconds: float, window: int, measured: Speed | None = None) -> str | None:
    """The model a fix's last round may go to: the largest installed catalogue model larger than ``in_use`` whose
    memory fits beside it and, by this machine's measurement, whose typical fix fits ``budget_seconds`` (with no
    measurement, only the bundled models, which are known to). None when there is none."""
    current = CATALOGUE.get(in_use)
    if current is None:
        return None  # a model file of its own: nothing to compare it with
    measured = measured if measured is not None else measured_speed()
    room = machine_memory().total * (1 - HEADROOM) - memory_estimate(current, window).total
    names = [*installed_models(), *(name for name, _ in downloaded() if name in CATALOGUE)]
    found = []
    for model in (CATALOGUE[name] for name in dict.fromkeys(names)):
        if model.size <= current.size or model.family != current.family:
            continue
        if memory_estimate(model, window).total > room:
            continue
        if measured is None or measured.model not in CATALOGUE:
            if model.bundled:
                found.append(model)
            continue
        speed = speed_of(model, measured)
        if speed is not None and fix_seconds(speed) <= budget_seconds:
            found.append(model)
    return max(found, key=lambda model: model.size).name if found else None

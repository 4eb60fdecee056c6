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
    "ANSWER_PROMPT",
    "ANSWER_SECONDS",
    "ANSWER_TOKENS",
    "FIX_PROMPT",
    "FIX_SAMPLES",
    "FIX_SAMPLE_TOKENS",
    "RoleChoice",
    "Speed",
    "active_parameters",
    "answer_seconds",
    "fix_seconds",
    "measured_speed",
    "parameters",
    "predict",
    "recommend_roles",
    "remember",
    "speed_of",
    "stronger_model",
]

FIX_PROMPT = 1_500
"""Tokens a typical fix's prompt has (the failing tests, the code of three locations)."""
FIX_SAMPLES = 8
FIX_SAMPLE_TOKENS = 200
"""A typical fix's samples, and each one's tokens (a function written again)."""
ANSWER_PROMPT = 500
ANSWER_TOKENS = 100
"""A typical answer in a conversation: the tokens it reads (the question, its turn's context, a tool's result: the
instructions and the tools' descriptions come from the prompt cache) and writes (the newcomer script's answers are
150 to 1,150 characters, some 40 to 300 tokens)."""
ANSWER_SECONDS = 30.0
"""The interactive budget: the longest a typical answer of the turn's model (``models.main``) may take."""
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


def answer_seconds(speed: Speed) -> float:
    """A typical answer's model time at ``speed``: its new prompt read, its answer written."""
    return ANSWER_PROMPT / speed.prompt_per_second + ANSWER_TOKENS / speed.generate_per_second


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


@dataclass(frozen=True, slots=True)
class RoleChoice:
    """The model :func:`recommend_roles` recommends for one role of cortana.yml's ``models:``.

    Attributes:
        role: ``main``, ``sampler`` or ``escalate``.
        model: a catalogue name; None: no model for the role (escalate: none larger fits; the fix's last round
            stays on the model before it).
        why: the rule it met, with the figure, for a person.
        seconds: main: a typical answer's seconds; escalate: a typical fix's; sampler: a typical fix's samples'.
            None: unknown (nothing measured).
        measured: whether that figure is this machine's measurement of the model itself (else predicted from the
            measurement of another, or unknown).
    """

    role: str
    model: str | None
    why: str
    seconds: float | None = None
    measured: bool = False


def recommend_roles(
    memory_total: int, window: int, measured: Speed | None, budget_seconds: float
) -> dict[str, RoleChoice]:
    """A model per role of ``models:``, from this machine's measured speed (predicted for the models not measured)
    and its memory: the Qwen2.5-Coder sizes of the catalogue, whose memory at ``window`` fits within
    ``1 - HEADROOM`` of ``memory_total``.

    - main: the largest whose typical answer (:data:`ANSWER_PROMPT` read, :data:`ANSWER_TOKENS` written) takes at
      most :data:`ANSWER_SECONDS`; if none does, the fastest.
    - sampler: the fastest at the fix's parallel samples whose memory fits beside main's (the samples are many and
      short); main itself when no faster one fits.
    - escalate: the largest larger than main whose memory fits beside main's and whose typical fix fits
      ``budget_seconds``; none when no larger one does (the sampler is closed before the last round starts).

    With nothing measured, speeds are unknown: only the bundled models are candidates (they answer in time on two
    cores), main the larger of them, ranked by size as the prediction would rank them.
    """
    room = memory_total * (1 - HEADROOM)
    family = sorted((m for m in CATALOGUE.values() if m.family == "qwen2.5"), key=lambda model: model.size)
    if measured is None or measured.model not in CATALOGUE:
        family = [model for model in family if model.bundled]
    need = {model.name: memory_estimate(model, window).total for model in family}
    fitting = [model for model in family if need[model.name] <= room] or family[:1]
    speeds = {model.name: speed_of(model, measured) for model in fitting} if measured is not None else {}

    def basis(model: CatalogueModel) -> str:
        speed = speeds.get(model.name)
        if speed is None:
            return "speed not measured: `cortana models measure`"
        return "measured here" if speed.measured else f"predicted from {measured.model if measured else '?'}"

    main_choice = _main(fitting, speeds, basis)
    main = CATALOGUE[main_choice.model or fitting[0].name]
    beside = room - need[main.name]
    return {
        "main": main_choice,
        "sampler": _sampler(main, [m for m in fitting if need[m.name] <= beside or m is main], speeds, basis),
        "escalate": _escalate(main, [m for m in fitting if need[m.name] <= beside], speeds, basis, budget_seconds),
    }


def _main(fitting: list[CatalogueModel], speeds: dict[str, Speed | None], basis: Any) -> RoleChoice:
    if not speeds:
        choice = fitting[-1]
        return RoleChoice("main", choice.name, f"the largest bundled model that fits ({basis(choice)})")
    times = {model.name: answer_seconds(speed) for model in fitting if (speed := speeds.get(model.name))}
    fast = [model for model in fitting if times.get(model.name, ANSWER_SECONDS + 1) <= ANSWER_SECONDS]
    choice = fast[-1] if fast else fitting[0]
    seconds = times.get(choice.name)
    about = f"about {seconds:.0f} s" if seconds is not None else "an unknown time"
    speed = speeds.get(choice.name)
    measured = speed is not None and speed.measured
    if not fast:
        why = f"the fastest: even it takes {about} for a typical answer here, over {ANSWER_SECONDS:.0f} s"
    else:
        why = f"the largest whose typical answer takes at most {ANSWER_SECONDS:.0f} s here: {about}"
    return RoleChoice("main", choice.name, f"{why} ({basis(choice)})", seconds, measured)


def _sampler(
    main: CatalogueModel, beside: list[CatalogueModel], speeds: dict[str, Speed | None], basis: Any
) -> RoleChoice:
    def rate(model: CatalogueModel) -> float:
        speed = speeds.get(model.name)
        return speed.samples_per_second if speed is not None else 1 / model.size  # unmeasured: by size, as predicted

    choice = max(beside, key=lambda model: (rate(model), -model.size))
    speed = speeds.get(choice.name)
    seconds = FIX_SAMPLES * FIX_SAMPLE_TOKENS / speed.samples_per_second if speed is not None else None
    if choice is main:
        return RoleChoice("sampler", choice.name, "main itself: no faster model fits beside it", seconds)
    written = f"{speed.samples_per_second:.1f} tokens/s over the fix's parallel samples" if speed else "the smallest"
    return RoleChoice(
        "sampler", choice.name, f"the fastest that fits beside main: {written} ({basis(choice)})", seconds,
        speed is not None and speed.measured,
    )  # fmt: skip


def _escalate(
    main: CatalogueModel,
    beside: list[CatalogueModel],
    speeds: dict[str, Speed | None],
    basis: Any,
    budget_seconds: float,
) -> RoleChoice:
    larger = [model for model in beside if model.size > main.size]
    times = {model.name: fix_seconds(speed) for model in larger if (speed := speeds.get(model.name))}
    if speeds:
        larger = [model for model in larger if times.get(model.name, budget_seconds + 1) <= budget_seconds]
    if not larger:
        return RoleChoice(
            "escalate", None, f"none: no larger model fits beside main with a typical fix within {budget_seconds:.0f} s"
        )
    choice = larger[-1]
    seconds = times.get(choice.name)
    speed = speeds.get(choice.name)
    about = f": about {seconds:.0f} s" if seconds is not None else ""
    why = f"the largest that fits beside main whose typical fix fits the {budget_seconds:.0f} s budget{about}"
    return RoleChoice(
        "escalate", choice.name, f"{why} ({basis(choice)})", seconds, speed is not None and speed.measured
    )

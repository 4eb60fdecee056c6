"""Typed output: ``Agent(output_type=...)`` makes ``result.output`` a validated value, not text.

Any type pydantic validates works: a model, a dataclass, a TypedDict, ``list[Model]``, a plain type, a
union. Its JSON schema goes to the engine as a constraint (``ModelSettings.json_schema``): on llama.cpp
and the embedded engine a grammar made from the schema, so a small model cannot write malformed JSON;
Ollama's ``format``; ``response_format`` elsewhere. The typed answer is the run's last step, in the same
run (``agent/run.py``): a turn that offers no tools is constrained from its first model call; one with tools
first does its work, then gives its answer in one more call, constrained and without tools. A value that fails
validation goes back to the model with the error (``output_retries`` times), then
:class:`OutputValidationError` holds the last attempt. While a constrained call streams, the JSON so far is
validated partially (:meth:`OutputSpec.partial`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError

from cortana.errors import CortanaError
from cortana.models.base import ModelSettings

__all__ = ["OutputSpec", "OutputValidationError", "output_spec"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.S)
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")
_OPENING_FENCE = re.compile(r"^\s*```(?:json)?\s*\n")
SHOWN_CHARS = 2_000
"""The most of a failed attempt quoted back to the model."""


class OutputValidationError(CortanaError):
    """The model's answer did not validate as the output type, after the retries.

    Attributes:
        attempt: the last answer's text.
        problem: why it did not validate.
    """

    def __init__(self, message: str, *, attempt: str, problem: str) -> None:
        super().__init__(message)
        self.attempt = attempt
        self.problem = problem


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """An output type, its validator and its JSON schema (built once, when the agent is made)."""

    type: Any
    adapter: TypeAdapter[Any]
    schema: dict[str, Any]

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        return cls(output_type, adapter, adapter.json_schema())

    def parse(self, text: str) -> tuple[Any, str | None]:
        """The validated value of ``text`` (JSON, a Markdown fence around it allowed), or why there is none."""
        fenced = _FENCE.match(text)
        raw = fenced.group(1) if fenced else text.strip()
        try:
            return self.adapter.validate_json(raw), None
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in item['loc']) or 'the value'}: {item['msg']}"
                for item in error.errors(include_url=False)[:8]
            )
            return None, problems

    def partial(self, text: str) -> tuple[bool, Any]:
        """Whether the unfinished JSON ``text`` validates yet with its incomplete end left out, and the value."""
        opening = _OPENING_FENCE.match(text)
        raw = text[opening.end() :] if opening else text
        if not raw.strip():
            return False, None
        try:
            return True, self.adapter.validate_json(raw, experimental_allow_partial="trailing-strings")
        except ValidationError:
            return False, None

    @property
    def name(self) -> str:
        """The output type as a person would write it (``Contact``, ``list[Contact]``)."""
        if isinstance(self.type, type) and not typing.get_args(self.type):
            return self.type.__name__
        return _QUALIFIED.sub(r"\1", str(self.type).replace("typing.", ""))

    def settings(self, base: ModelSettings) -> ModelSettings:
        """``base`` with the answer constrained to the schema."""
        return dataclasses.replace(base, json_schema=self.schema, tool_choice=None)

    def ask(self, attempt: str | None, problem: str | None) -> str:
        """The prompt that asks for the answer as JSON (again, with what was wrong, after a failed attempt)."""
        schema = json.dumps(self.schema, separators=(",", ":"))
        if attempt is None:
            return f"Now give your final answer as JSON matching this schema, and nothing else:\n{schema}"
        shown = attempt if len(attempt) <= SHOWN_CHARS else attempt[:SHOWN_CHARS] + "…"
        return (
            f"This answer does not match the schema ({problem}):\n{shown}\n\n"
            f"Answer again as JSON matching this schema, and nothing else:\n{schema}"
        )


@functools.lru_cache(maxsize=256)
def output_spec(output_type: Any) -> OutputSpec:
    """The :class:`OutputSpec` of ``output_type``, built once per type (a pydantic schema takes milliseconds)."""
    return OutputSpec.of(output_type)

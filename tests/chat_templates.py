"""The models' own chat templates (tests/fixtures/templates), rendered as llama.cpp and transformers render them.

A sandboxed Jinja environment with the helpers chat templates call (``raise_exception``, ``strftime_now``, a
``tojson`` that keeps non-ASCII text), blocks trimmed as transformers trims them. A tool call's arguments reach the
template as an object, as llama.cpp passes them to templates that iterate over them (Qwen3-Coder's), and a message
without text has an empty string for content.
"""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any

from tests.wire import FIXTURES

TEMPLATES = FIXTURES / "templates"


@cache
def template_text(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def render(
    name: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    **kwargs: Any,
) -> str:
    """The prompt template ``name`` makes of an OpenAI-shaped conversation (``kwargs``: the chat-template kwargs)."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"the chat template refused the conversation: {message}")

    def tojson(value: Any, indent: int | None = None, **_: Any) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    return environment.from_string(template_text(name)).render(
        messages=[_with_object_arguments(message) for message in messages],
        tools=tools or [],
        add_generation_prompt=add_generation_prompt,
        bos_token="",
        eos_token="",
        **kwargs,
    )


def _with_object_arguments(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("content") is None:  # an assistant's calls without text: llama.cpp passes an empty string
        message = {**message, "content": ""}
    calls = message.get("tool_calls")
    if not calls:
        return message
    converted = []
    for call in calls:
        function = dict(call.get("function") or {})
        if isinstance(function.get("arguments"), str):
            function["arguments"] = json.loads(function["arguments"] or "{}")
        converted.append({**call, "function": function})
    return {**message, "tool_calls": converted}

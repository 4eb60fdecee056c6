"""A tool's JSON schema from a Python signature: type hints through pydantic, descriptions from the docstring.

A parameter annotated :class:`~cortana.tools.context.RunContext` is the run's
context, filled in by the agent and left out of the schema.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from cortana.errors import UserError
from cortana.tools.context import RunContext

__all__ = ["arguments_model", "clean_schema", "context_parameter"]


def arguments_model(
    function: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of ``function``'s parameters, and the name of its context parameter."""
    hints = _type_hints(function, tool_name)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(function).parameters.values():
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(f"Tool '{tool_name}' takes *{param.name}; tools need named, typed parameters.")
        default = ... if param.default is param.empty else param.default
        described = arg_docs.get(param.name)
        fields[param.name] = (annotation, Field(default, description=described) if described else default)
    model = create_model(
        f"{tool_name.replace('.', '_').replace('-', '_')}_arguments",
        __config__=ConfigDict(arbitrary_types_allowed=True),
        **fields,
    )
    return model, context_param


def context_parameter(function: Callable[..., Any], tool_name: str) -> str | None:
    """The name of ``function``'s ``RunContext`` parameter, if it has one."""
    hints = _type_hints(function, tool_name)
    return next((name for name, hint in hints.items() if name != "return" and _is_context(hint)), None)


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` keys: they cost small models context and say nothing.

    An optional ``X | None = None`` keeps its ``anyOf`` with ``null`` and ``"default": null``: shown
    as a plain optional ``X``, Qwen2.5-Coder 1.5B filled it in (``end_line: 10`` for a whole file).
    """

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: clean(value, in_properties=(key in ("properties", "$defs")))
                for key, value in node.items()
                if in_properties or key != "title"
            }
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    cleaned.setdefault("properties", {})
    return cleaned


def _type_hints(function: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    try:
        return get_type_hints(function, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise UserError(f"Cannot read the type hints of tool '{tool_name}': {exc}") from exc


def _is_context(annotation: Any) -> bool:
    """``RunContext``, or ``RunContext | None``."""
    return annotation is RunContext or RunContext in get_args(annotation)

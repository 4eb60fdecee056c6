"""Checking the arguments a model wrote against a tool's schema, and telling it what to fix.

Two validators share one error format: :class:`PydanticArguments` for tools
made from Python functions, and :class:`SchemaArguments` for tools defined by
a JSON schema (MCP servers', other frameworks'), which checks what the schema
states at the top level (required arguments, types, enums) and coerces what
is lossless (``"5"`` -> 5). A failure is a :class:`ToolArgumentsError` the
model reads, listing each problem and the schema to match.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from cortana.errors import ToolError

__all__ = ["ArgumentValidator", "PydanticArguments", "SchemaArguments", "ToolArgumentsError"]


class ToolArgumentsError(ToolError):
    """The model's arguments did not validate against the tool's schema."""


class ArgumentValidator(Protocol):
    """Turns the model's arguments into the keyword arguments a tool function gets."""

    def validate(self, arguments: dict[str, Any], tool_name: str) -> dict[str, Any]:
        """The validated arguments; raises :class:`ToolArgumentsError` with what to fix."""
        ...


def _invalid(tool_name: str, problems: list[str], properties: dict[str, Any]) -> ToolArgumentsError:
    expected = json.dumps(properties, separators=(",", ":"))
    return ToolArgumentsError(
        f"Invalid arguments for tool '{tool_name}':\n"
        + "\n".join(problems)
        + f"\nCall '{tool_name}' again with arguments that match: {expected}",
        tool_name=tool_name,
    )


class PydanticArguments:
    """Validates (and losslessly coerces) with the pydantic model built from a function's signature."""

    def __init__(self, model: type[BaseModel], parameters: dict[str, Any]) -> None:
        self.model = model
        self.properties: dict[str, Any] = parameters.get("properties", {})

    def validate(self, arguments: dict[str, Any], tool_name: str) -> dict[str, Any]:
        """The arguments as the function's parameters, validated."""
        try:
            validated = self.model.model_validate(arguments)
        except ValidationError as exc:
            problems = []
            for error in exc.errors(include_url=False):
                where = ".".join(str(part) for part in error["loc"]) or "arguments"
                got = "" if error["type"] == "missing" else f" (got {json.dumps(error.get('input'), default=str)[:80]})"
                problems.append(f"- {where}: {error['msg']}{got}")
            raise _invalid(tool_name, problems, self.properties) from None
        return {name: getattr(validated, name) for name in type(validated).model_fields}


class SchemaArguments:
    """Validates against a JSON schema's top level: required arguments, types and enums."""

    def __init__(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters
        self.properties: dict[str, Any] = parameters.get("properties", {})

    def validate(self, arguments: dict[str, Any], tool_name: str) -> dict[str, Any]:
        """The arguments, with lossless coercions applied (``"5"`` -> 5 for an integer)."""
        problems: list[str] = []
        validated = dict(arguments)
        for required in self.parameters.get("required", []):
            if required not in arguments:
                problems.append(f"- {required}: Field required")
        for key, value in arguments.items():
            schema = self.properties.get(key)
            if schema is None:
                continue
            coerced, problem = _coerce(value, schema)
            if problem:
                problems.append(f"- {key}: {problem} (got {json.dumps(value, default=str)[:80]})")
            else:
                validated[key] = coerced
        if problems:
            raise _invalid(tool_name, problems, self.properties)
        return validated


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """``value`` as the schema's type where that is lossless, or a problem to report."""
    if "enum" in schema and value not in schema["enum"]:
        return value, f"Input should be one of {schema['enum']}"
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kind is None or (value is None and "null" in kinds):
        return value, None
    for candidate in kinds:
        if candidate == "string" and isinstance(value, str):
            return value, None
        if candidate == "boolean":
            if isinstance(value, bool):
                return value, None
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true", None
        if candidate in ("integer", "number") and not isinstance(value, bool):
            number = _number(value) if isinstance(value, str) else value
            if isinstance(number, int):  # exact: float() would round past 2**53 and overflow past 1e308
                return number, None
            if isinstance(number, float):
                if candidate == "integer":
                    if number.is_integer():
                        return int(number), None
                    continue
                return number, None
        if candidate == "array" and isinstance(value, list):
            return value, None
        if candidate == "object" and isinstance(value, dict):
            return value, None
    return value, f"Input should be of type {' or '.join(str(k) for k in kinds)}"


def _number(text: str) -> int | float | None:
    """The number a string spells (``"7"``, ``" 2.5 "``), exactly for whole numbers; None if it spells none."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None

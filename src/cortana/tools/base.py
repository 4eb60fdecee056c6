"""Tools from plain Python functions, validated with pydantic.

``Tool(fn)`` (or ``@tool``) reads ``fn``'s signature: type hints become the
JSON schema the model sees, the docstring's summary becomes the description
and its Args section the per-argument descriptions. A parameter annotated
with :class:`RunContext` is filled in by the agent and left out of the schema.
``ToolGroup`` bundles tools that the model loads on demand.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, get_args, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from cortana.errors import ToolError, UserError
from cortana.models.base import ToolSpec
from cortana.tools.docstrings import parse_docstring

if TYPE_CHECKING:
    from cortana.agent.agent import Agent
    from cortana.messages import Message, RunMetrics, ThreadRef

__all__ = [
    "RunContext",
    "SchemaTool",
    "Tool",
    "ToolArgumentsError",
    "ToolGroup",
    "format_tool_result",
    "loose_name",
    "tool",
]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# Sync tools run here so that a slow tool never blocks the event loop. Its own
# pool (not asyncio's default, sized from the CPU count) so that
# max_parallel_tools, not the core count, bounds how many run at once.
_executor: ThreadPoolExecutor | None = None


def _tool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="cortana-tool")
    return _executor


@dataclasses.dataclass(slots=True)
class RunContext:
    """What a tool may know about the run that called it.

    Declare a parameter annotated ``RunContext`` to receive it; it is not part
    of the tool's schema.

    Attributes:
        agent: the agent running the tool.
        thread: the conversation the run belongs to.
        metrics: the run's live metrics.
        messages: the run's messages so far (read-only by convention).
        state: a per-run scratch dict shared by all tools of the run.
    """

    agent: Agent
    thread: ThreadRef
    metrics: RunMetrics
    messages: list[Message]
    state: dict[str, Any] = dataclasses.field(default_factory=dict)


class ToolArgumentsError(ToolError):
    """The model's arguments did not validate against the tool's schema."""


class Tool:
    """A callable the model may ask to run.

    Args:
        function: a sync or async callable with type-hinted parameters.
        name: the name shown to the model; defaults to the function's name.
        description: defaults to the docstring's summary.
        read_only: the tool only reads (files, state); the permission gate and
            repeated-read cache use this.
        default_action: what the permission gate does with this tool when no rule names
            it (``"ask"`` for tools of outside servers); None: the gate's own default.
    """

    __slots__ = (
        "_args_model",
        "_context_param",
        "_is_async",
        "_spec",
        "default_action",
        "description",
        "function",
        "name",
        "parameters",
        "read_only",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = False,
        default_action: Literal["allow", "ask", "deny"] | None = None,
    ) -> None:
        if not callable(function):
            raise UserError(f"Tool() needs a callable, got {type(function).__name__}.")
        self.function = function
        self.name: str = name or str(getattr(function, "__name__", ""))
        if not _NAME.match(self.name):
            raise UserError(
                f"Tool name {self.name!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-'. "
                "Pass name= to Tool() or @tool()."
            )
        doc_description, arg_docs = parse_docstring(inspect.getdoc(function))
        self.description = description if description is not None else doc_description
        self.read_only = read_only
        self.default_action = default_action
        self._is_async = _is_async_callable(function)
        self._args_model, self._context_param = _arguments_model(function, self.name, arg_docs)
        self.parameters = _clean_schema(self._args_model.model_json_schema())
        self._spec = ToolSpec(self.name, self.description, self.parameters)

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return self._spec

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate (and losslessly coerce) the model's arguments.

        Raises:
            ToolArgumentsError: with a message the model can act on.
        """
        try:
            model = self._args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(self._explain(exc, arguments), tool_name=self.name) from None
        return {field: getattr(model, field) for field in type(model).model_fields}

    async def invoke(self, arguments: dict[str, Any], context: RunContext | None = None) -> Any:
        """Run the tool with already validated ``arguments``."""
        kwargs = dict(arguments)
        if self._context_param:
            kwargs[self._context_param] = context
        if self._is_async:
            return await self.function(**kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_tool_executor(), functools.partial(self.function, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, as if it were not a tool."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}{', read_only=True' if self.read_only else ''})"

    def _explain(self, exc: ValidationError, arguments: dict[str, Any]) -> str:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            got = "" if error["type"] == "missing" else f" (got {json.dumps(error.get('input'), default=str)[:80]})"
            problems.append(f"- {where}: {error['msg']}{got}")
        expected = json.dumps(self.parameters.get("properties", {}), separators=(",", ":"))
        return (
            f"Invalid arguments for tool '{self.name}':\n"
            + "\n".join(problems)
            + f"\nCall '{self.name}' again with arguments that match: {expected}"
        )


class SchemaTool(Tool):
    """A tool defined by a JSON schema rather than a Python signature (MCP tools, other frameworks').

    Validation checks what the schema states at the top level (required
    arguments, types, enums) and coerces what is lossless (``"5"`` -> 5);
    the function receives the arguments as keyword arguments.

    Args:
        name: the tool's name.
        description: what it does.
        parameters: the JSON schema of its arguments (an ``object`` schema).
        function: called with the validated arguments (sync or async).
        read_only: the tool only reads.
    """

    __slots__ = ()

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        function: Callable[..., Any],
        *,
        read_only: bool = False,
        default_action: Literal["allow", "ask", "deny"] | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise UserError(f"Tool name {name!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-'.")
        self.function = function
        self.name = name
        self.description = description
        self.read_only = read_only
        self.default_action = default_action
        self.parameters = {"type": "object", "properties": {}, **parameters}
        self._is_async = _is_async_callable(function)
        self._context_param = None
        self._args_model = None  # type: ignore[assignment]
        self._spec = ToolSpec(name, description, self.parameters)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        properties: dict[str, Any] = self.parameters.get("properties", {})
        problems: list[str] = []
        validated = dict(arguments)
        for required in self.parameters.get("required", []):
            if required not in arguments:
                problems.append(f"- {required}: Field required")
        for key, value in arguments.items():
            schema = properties.get(key)
            if schema is None:
                continue
            coerced, problem = _coerce(value, schema)
            if problem:
                problems.append(f"- {key}: {problem} (got {json.dumps(value, default=str)[:80]})")
            else:
                validated[key] = coerced
        if problems:
            expected = json.dumps(properties, separators=(",", ":"))
            raise ToolArgumentsError(
                f"Invalid arguments for tool '{self.name}':\n"
                + "\n".join(problems)
                + f"\nCall '{self.name}' again with arguments that match: {expected}",
                tool_name=self.name,
            )
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
            number = value
            if isinstance(value, str):
                try:
                    number = float(value.strip())
                except ValueError:
                    continue
            if isinstance(number, (int, float)):
                if candidate == "integer":
                    if float(number).is_integer():
                        return int(number), None
                    continue
                return number, None
        if candidate == "array" and isinstance(value, list):
            return value, None
        if candidate == "object" and isinstance(value, dict):
            return value, None
    return value, f"Input should be of type {' or '.join(str(k) for k in kinds)}"


@dataclasses.dataclass
class ToolGroup:
    """Tools the model loads on demand with ``load_tools``, keeping small prompts small.

    Args:
        name: the group's name, shown to the model.
        description: one line saying when the group is useful.
        tools: the group's tools (``Tool`` objects or plain callables).
        loader: for tools known only at run time (an MCP server's): an async function
            returning them, called the first time the group is loaded.
        eager: offer the group's tools from the start of every run, without ``load_tools``.
    """

    name: str
    description: str
    tools: list[Tool] = dataclasses.field(default_factory=list)
    loader: Callable[[], Awaitable[list[Tool]]] | None = None
    eager: bool = False

    def __post_init__(self) -> None:
        self.tools = [t if isinstance(t, Tool) else Tool(t) for t in self.tools]
        if not _NAME.match(self.name):
            raise UserError(f"ToolGroup name {self.name!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-'.")
        self._loaded = self.loader is None

    async def ensure_loaded(self) -> list[Tool]:
        """The group's tools, calling ``loader`` the first time (its errors propagate)."""
        if not self._loaded and self.loader is not None:
            self.tools = list(await self.loader())
            self._loaded = True
        return self.tools


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, read_only: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`Tool`; use bare (``@tool``) or with options (``@tool(read_only=True)``)."""
    if function is not None:
        return Tool(function)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description, read_only=read_only)

    return decorate


def as_tools(items: Sequence[Tool | ToolGroup | Callable[..., Any]]) -> tuple[list[Tool], list[ToolGroup]]:
    """Split an agent's ``tools=`` list into tools and groups, wrapping plain callables."""
    tools: list[Tool] = []
    groups: list[ToolGroup] = []
    for item in items:
        if isinstance(item, ToolGroup):
            groups.append(item)
        elif isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            tools.append(Tool(item))
        else:
            raise UserError(f"tools= takes Tool, ToolGroup or callables; got {type(item).__name__}.")
    return tools, groups


def loose_name(name: str) -> str:
    """A tool name with case and separators folded: small models write ``fs.read`` as ``fs_read``."""
    return re.sub(r"[._\-\s]+", "_", name.strip()).lower()


def format_tool_result(value: Any) -> str:
    """The text the model reads for a tool's return value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError):
        return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def _is_async_callable(function: Callable[..., Any]) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    call_method = getattr(type(function), "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call_method)


def _arguments_model(
    function: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of ``function``'s parameters, and the name of its context parameter."""
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception as exc:  # unresolvable forward references
        raise UserError(f"Cannot read the type hints of tool '{tool_name}': {exc}") from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
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


def _is_context(annotation: Any) -> bool:
    """``RunContext``, or ``RunContext | None``."""
    return annotation is RunContext or RunContext in get_args(annotation)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` keys: they cost small models context and say nothing."""

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

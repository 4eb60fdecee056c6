"""``Tool``: a callable the model may ask to run, and ``@tool`` to make one.

``Tool(fn)`` (or ``@tool``) reads ``fn``'s signature: type hints become the
JSON schema the model sees (``schema.py``), the docstring's summary becomes
the description and its Args section the per-argument descriptions
(``docstrings.py``), and arguments are validated with pydantic
(``validation.py``). Given ``parameters=``, a JSON schema is used as it is and
arguments are checked against it instead; :class:`SchemaTool` is that form,
for tools whose schema comes from elsewhere (MCP servers). Sync functions run
in Cortana's thread pool (``executor.py``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, overload

from cortana.errors import UserError
from cortana.models.base import ToolSpec
from cortana.tools.docstrings import parse_docstring
from cortana.tools.executor import is_async_callable, run_in_tool_thread
from cortana.tools.schema import arguments_model, clean_schema, context_parameter
from cortana.tools.validation import ArgumentValidator, PydanticArguments, SchemaArguments

if TYPE_CHECKING:
    from cortana.tools.context import RunContext

__all__ = ["SchemaTool", "Tool", "ToolKind", "check_name", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
Action = Literal["allow", "ask", "deny"]
ToolKind = Literal["read", "search", "edit", "delete", "move", "execute", "fetch", "think", "other"]
"""What a tool does, as an editor shows it (ACP's tool kinds): a fact the tool declares, read by every front end."""


def check_name(name: str, what: str = "Tool") -> str:
    """``name`` if engines accept it as a tool (or group) name; else a ``UserError`` saying what is allowed."""
    if not _NAME.match(name):
        hint = " Pass name= to Tool() or @tool()." if what == "Tool" else ""
        raise UserError(f"{what} name {name!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-'.{hint}")
    return name


class Tool:
    """A callable the model may ask to run.

    Args:
        function: a sync or async callable with type-hinted parameters.
        name: the name shown to the model; defaults to the function's name.
        description: defaults to the docstring's summary.
        parameters: a JSON schema of the arguments, to use instead of the one built from
            ``function``'s signature (the function then gets the arguments as keywords).
        read_only: the tool only reads (files, state); the permission gate, plan mode and the
            repeated-read cache use this.
        kind: what it does (:data:`ToolKind`; default ``read`` for a read-only tool, else
            ``other``): an editor's icon for its calls.
        writes: the argument that names the file it writes (``path``), if it writes one: front
            ends show the call's diff from the turn's checkpoint.
        default_action: what the permission gate does with this tool when no rule names
            it (``"ask"`` for tools of outside servers); None: the gate's own default.
        timeout: the most seconds one call may run (None: the agent's ``tool_timeout``).
        answer_after: bookkeeping the model does on the side (a note to itself): after a round
            made only of successful calls of such tools, the next model call offers no tools, so
            the model answers. Small models otherwise call it again and again.
        live: what it reads changes by itself, with no call in between (a running process's output): an
            identical call is run again, never answered with an earlier call's result.
        requires_approval: a person must allow each call: the permission gate asks about it whatever its
            rules say (a rule may still refuse it), with no gate it is refused, and a run with
            ``defer_approvals=True`` pauses at it (docs/approvals.md).
    """

    __slots__ = (
        "_context_param",
        "_is_async",
        "_spec",
        "_validator",
        "answer_after",
        "default_action",
        "description",
        "function",
        "kind",
        "live",
        "name",
        "parameters",
        "read_only",
        "requires_approval",
        "timeout",
        "writes",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        read_only: bool = False,
        default_action: Action | None = None,
        timeout: float | None = None,
        answer_after: bool = False,
        kind: ToolKind | None = None,
        writes: str | None = None,
        live: bool = False,
        requires_approval: bool = False,
    ) -> None:
        if not callable(function):
            raise UserError(f"Tool() needs a callable, got {type(function).__name__}.")
        self.function = function
        self.name: str = check_name(name or str(getattr(function, "__name__", "")))
        doc_description, arg_docs = parse_docstring(inspect.getdoc(function))
        self.description = description if description is not None else doc_description
        self.read_only = read_only
        self.kind: ToolKind = kind or ("read" if read_only else "other")
        self.writes = writes
        self.answer_after = answer_after
        self.live = live
        self.default_action = default_action
        self.requires_approval = requires_approval
        if timeout is not None and not 0 < timeout < float("inf"):
            raise UserError(f"Tool {self.name!r}: timeout must be a positive number of seconds, got {timeout}.")
        self.timeout = timeout
        self._is_async = is_async_callable(function)
        self._validator: ArgumentValidator
        if parameters is None:
            model, self._context_param = arguments_model(function, self.name, arg_docs)
            self.parameters = clean_schema(model.model_json_schema())
            self._validator = PydanticArguments(model, self.parameters)
        else:
            self._context_param = context_parameter(function, self.name)
            self.parameters = {"type": "object", "properties": {}, **parameters}
            self._validator = SchemaArguments(self.parameters)
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
        return self._validator.validate(arguments, self.name)

    async def invoke(self, arguments: dict[str, Any], context: RunContext | None = None) -> Any:
        """Run the tool with already validated ``arguments``."""
        kwargs = dict(arguments)
        if self._context_param:
            kwargs[self._context_param] = context
        if self._is_async:
            return await self.function(**kwargs)
        return await run_in_tool_thread(self.function, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, as if it were not a tool."""
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}{', read_only=True' if self.read_only else ''})"


class SchemaTool(Tool):
    """A tool defined by a JSON schema rather than a Python signature (MCP tools, other frameworks').

    ``SchemaTool(name, description, parameters, function)`` is
    ``Tool(function, name=..., description=..., parameters=...)``: validation
    checks what the schema states at the top level (required arguments, types,
    enums) and coerces what is lossless (``"5"`` -> 5); the function receives
    the arguments as keyword arguments.

    Args:
        name: the tool's name.
        description: what it does.
        parameters: the JSON schema of its arguments (an ``object`` schema).
        function: called with the validated arguments (sync or async).
        read_only: the tool only reads.
        default_action: the permission gate's action when no rule names it.
        timeout: the most seconds one call may run.
        requires_approval: a person must allow each call (as ``Tool``'s).
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
        default_action: Action | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
    ) -> None:
        super().__init__(
            function,
            name=name,
            description=description,
            parameters=parameters,
            read_only=read_only,
            default_action=default_action,
            timeout=timeout,
            requires_approval=requires_approval,
        )


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, read_only: bool = False, requires_approval: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a :class:`Tool`; use bare (``@tool``) or with options (``@tool(read_only=True)``,
    ``@tool(requires_approval=True)``: a person must allow each call)."""
    if function is not None:
        return Tool(function)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool(fn, name=name, description=description, read_only=read_only, requires_approval=requires_approval)

    return decorate

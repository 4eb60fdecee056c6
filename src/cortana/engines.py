"""The engines Cortana drives, in one table: names, aliases, addresses, and what each can do.

Everything that names an engine reads it from here: cortana.yml's ``engine``,
``CORTANA_ENGINE`` and ``--engine`` (each accepts a name or an alias, spelled
loosely: ``llama.cpp``, ``LM-Studio``), the factory that connects, the
trust check that asks where a workspace's engine sends prompts,
``cortana doctor`` and the engine tables of the docs (a test compares them).
It imports nothing of Cortana's, so the settings can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["ENGINES", "ENGINE_NAMES", "Engine", "UnknownEngine", "engine_named", "url_problem"]


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine.

    Attributes:
        name: what cortana.yml and ``--engine`` say (``llamacpp``).
        title: what people call it (``llama.cpp server``).
        aliases: other names accepted for it (``vllm`` for ``openai``).
        default_url: where it is looked for when no ``base_url`` is given (None: it has no usual address).
        address_variables: environment variables that give its address, first one set winning.
        probed: ``auto`` looks for it on its default address.
        note: one line for the docs.

    What a connected engine can do (list models, switch them, count tokens) its client says
    (``ModelClient``'s capability properties), not this table.
    """

    name: str
    title: str
    aliases: tuple[str, ...] = ()
    default_url: str | None = None
    address_variables: tuple[str, ...] = ()
    probed: bool = False
    note: str = ""


ENGINES: tuple[Engine, ...] = (
    Engine(
        "auto",
        "the first running one",
        address_variables=("OLLAMA_HOST", "CORTANA_DMR_URL", "CORTANA_LLAMACPP_URL"),
        note="Ollama, Docker Model Runner, then a llama.cpp server on their usual ports; else the embedded engine",
    ),
    Engine(
        "ollama",
        "Ollama",
        default_url="http://127.0.0.1:11434",
        address_variables=("OLLAMA_HOST",),
        probed=True,
        note="its native API (/api/chat)",
    ),
    Engine(
        "docker",
        "Docker Model Runner",
        aliases=("dmr", "docker-model-runner"),
        default_url="http://127.0.0.1:12434",
        address_variables=("CORTANA_DMR_URL",),
        probed=True,
        note="its OpenAI-compatible API (/engines/v1)",
    ),
    Engine(
        "llamacpp",
        "llama.cpp server",
        aliases=("llama.cpp", "llama-server"),
        default_url="http://127.0.0.1:8080",
        address_variables=("CORTANA_LLAMACPP_URL",),
        probed=True,
        note="llama-server started with --jinja; tool calls written under a grammar",
    ),
    Engine(
        "embedded",
        "the embedded engine",
        aliases=("local",),
        note="llama.cpp in a child process on a bundled model or a .gguf file; nothing to start by hand",
    ),
    Engine(
        "openai",
        "an OpenAI-compatible server",
        aliases=("vllm", "sglang", "lmstudio", "openai-compatible"),
        address_variables=("OPENAI_BASE_URL",),
        note="any server speaking /v1/chat/completions at base_url (vLLM, SGLang, LM Studio); never probed",
    ),
)
"""Every engine, ``auto`` first."""

ENGINE_NAMES: tuple[str, ...] = tuple(engine.name for engine in ENGINES)


class UnknownEngine(ValueError):
    """A name that is no engine's; its message lists them."""


def _loose(text: str) -> str:
    return "".join(character for character in text.lower() if character.isalnum())


_BY_NAME = {_loose(spelling): engine for engine in ENGINES for spelling in (engine.name, *engine.aliases)}


def engine_named(text: str) -> Engine:
    """The engine ``text`` names: a name or an alias, case, spaces, dots and dashes aside (``LM-Studio``).

    Raises:
        UnknownEngine: no engine is called that; the message lists the names and aliases.
    """
    engine = _BY_NAME.get(_loose(text))
    if engine is None:
        names = ", ".join(ENGINE_NAMES)
        aliases = ", ".join(f"{alias} ({engine.name})" for engine in ENGINES for alias in engine.aliases)
        raise UnknownEngine(f"no engine is called {text!r}; use one of {names}, or an alias: {aliases}")
    return engine


def url_problem(url: str) -> str | None:
    """Why ``url`` is not an engine's address (``None``: it is one), with the form it should take."""
    example = "write it as http://HOST:PORT, e.g. http://127.0.0.1:8080 (an IPv6 host in brackets: http://[::1]:8080)"
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as error:
        return f"{url!r} is not an address ({error}); {example}"
    if parts.scheme not in ("http", "https"):
        return f"{url!r} is not an http or https address; {example}"
    if not parts.hostname or any(character.isspace() for character in parts.netloc):
        return f"{url!r} names no host; {example}"
    return None

"""``create_model_client``: pick the configured engine, or find one, and connect to it.

What is not passed comes from the settings (cortana.yml and the environment,
see ``cortana.config``). With no engine named or configured it probes Ollama (11434, or ``OLLAMA_HOST``), Docker
Model Runner (12434, or ``CORTANA_DMR_URL``) and llama.cpp (8080, or
``CORTANA_LLAMACPP_URL``) on 127.0.0.1 at once and uses the first in that order
that answers with a usable model; with none running it starts the embedded
engine on a bundled model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from cortana.config import Settings, engine_url, load_settings, openai_server
from cortana.engines import UnknownEngine, engine_named, url_problem
from cortana.errors import ConfigError, EngineUnavailable, ModelError, UserError
from cortana.models.base import ModelClient
from cortana.models.docker import DEFAULT_DMR_URL, DockerModelRunnerClient
from cortana.models.embedded import EmbeddedClient
from cortana.models.llamacpp import DEFAULT_LLAMACPP_URL, LlamaCppClient
from cortana.models.ollama import OllamaClient, ollama_base_url
from cortana.models.openai_server import OpenAIServerClient
from cortana.models.stores import names_a_file

__all__ = ["create_model_client", "default_url", "probe_engines"]


async def create_model_client(
    engine: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    context_window: int | None = None,
    threads: int | None = None,
    batch_threads: int | None = None,
    parallel: int | None = None,
    prompt_cache: str | None = None,
    keep_alive: float | None = None,
    recover_text_tool_calls: bool = True,
    probe_timeout: float = 0.5,
    settings: Settings | None = None,
    **options: Any,
) -> ModelClient:
    """A connected ``ModelClient`` for the chosen (or first running) engine.

    Every argument left out comes from ``settings``: by default cortana.yml of
    the current folder and the user, and the environment (``CORTANA_ENGINE``,
    ``CORTANA_MODEL``, ``OLLAMA_CONTEXT_WINDOW``...; see ``cortana.config``).

    Args:
        engine: a name or an alias of :data:`cortana.engines.ENGINES`: ``ollama``, ``docker``, ``llamacpp``,
            ``embedded``, ``openai`` (any OpenAI-compatible server at ``base_url``: ``vllm``, ``sglang``,
            ``lmstudio``...; never probed), or ``auto`` to probe.
        model: the model name on that engine; for ``embedded``, a bundled or catalogue name, a model on this disk
            (``ollama:NAME:TAG``, ``lmstudio:PUBLISHER/REPO/FILE.gguf``, ``hf:OWNER/REPO/FILE.gguf``) or a .gguf
            path, which ``auto`` also starts the embedded engine for.
        base_url: the engine's address (defaults: each engine's usual port on 127.0.0.1).
        api_key: sent as a bearer token to a llama.cpp server or Docker Model Runner that wants one
            (the embedded engine makes its own).
        context_window: the window to use where the engine does not report one
            (for Ollama, the ``num_ctx`` sent; for the embedded engine, its size).
        threads: CPU threads the embedded engine generates with.
        batch_threads: CPU threads the embedded engine reads a prompt with (default: every core).
        parallel: request slots for the embedded engine (one prompt cache each); for ``openai``, the most requests
            sent at once for several answers to one prompt (the fix's samples, spread over the server's replicas).
        prompt_cache: for the embedded engine, a name under which its prompt cache is kept between
            processes (saved on ``aclose()``, restored at the next start); None: not kept.
        keep_alive: seconds the model stays loaded after the last user leaves: the embedded engine stays
            running for the next process (default 0: it stops with the client); Ollama's ``keep_alive``.
        recover_text_tool_calls: recover tool calls the model wrote as text.
        probe_timeout: seconds each probe waits when looking for a running engine.
        settings: where the left-out arguments come from (default: ``load_settings(Path.cwd())``).
        options: passed to the adapter (``think``, ``timeout``...).
    """
    settings = settings if settings is not None else load_settings(Path.cwd())
    engine = engine or settings.engine
    model = model or settings.model
    if base_url is not None and (problem := url_problem(base_url)):
        raise ConfigError(problem, key="base_url")
    base_url = base_url or settings.base_url
    api_key = api_key or settings.api_key
    context_window = context_window if context_window is not None else settings.context_window
    threads = threads if threads is not None else settings.threads
    batch_threads = batch_threads if batch_threads is not None else settings.batch_threads
    parallel = parallel if parallel is not None else settings.parallel
    keep_alive = keep_alive if keep_alive is not None else settings.keep_alive
    try:
        name = engine_named(engine or "auto").name
    except UnknownEngine as error:
        raise UserError(f"Unknown engine: {error}.") from None
    common: dict[str, Any] = {"recover_text_tool_calls": recover_text_tool_calls, **options}
    embedded = {
        "context_window": context_window,
        "threads": threads,
        "batch_threads": batch_threads,
        "parallel": parallel,
        "prompt_cache": prompt_cache,
        "keep_alive": keep_alive or 0,
        **common,
    }
    if name == "embedded" or (name == "auto" and model and names_a_file(model)):
        # A model file on this disk (ollama:, lmstudio:, hf:, a .gguf path): only the embedded engine runs a file,
        # and a running engine would serve its own model under that name.
        return await EmbeddedClient.start(model, **embedded)
    send_key = settings.send_key_over_http
    if name == "openai":
        env_url, env_key = openai_server()
        server = OpenAIServerClient(
            model or "",
            base_url=base_url or env_url or "",
            api_key=api_key or env_key,
            send_key_over_http=send_key,
            context_window=context_window,
            parallel=parallel,
            **common,
        )
        return await _connected(server, server.connect)
    keyed = {**common, "api_key": api_key, "keep_alive": keep_alive, "send_key_over_http": send_key}
    if name != "auto":
        return await _connect(name, model=model, base_url=base_url, context_window=context_window, **keyed)

    reasons: list[str] = []
    found = await probe_engines(probe_timeout)
    for candidate in ("ollama", "docker", "llamacpp"):
        if candidate not in found:
            continue
        try:
            return await _connect(candidate, model=model, base_url=None, context_window=context_window, **keyed)
        except ModelError as exc:
            reasons.append(f"{candidate}: {exc}")
    try:
        return await EmbeddedClient.start(model, **embedded)
    except EngineUnavailable as exc:
        tried = "; ".join(reasons) or (
            "nothing answered on 127.0.0.1 ports 11434 (Ollama), 12434 (Docker Model Runner), 8080 (llama.cpp)"
        )
        raise EngineUnavailable(
            f"No engine found ({tried}). {exc} Or start one: `ollama serve`, Docker Model Runner, "
            "or `llama-server -m MODEL.gguf --jinja`."
        ) from exc


async def probe_engines(probe_timeout: float = 0.5) -> set[str]:
    """Which engines answer on their default loopback addresses (probed concurrently)."""
    probes: dict[str, tuple[str, str, Callable[[Any], bool]]] = {
        "ollama": (ollama_base_url(), "/api/version", lambda data: "version" in data),
        "docker": (default_url("docker"), "/engines/v1/models", lambda data: "data" in data),
        "llamacpp": (default_url("llamacpp"), "/health", lambda data: data.get("status") == "ok"),
    }

    async with httpx.AsyncClient(timeout=probe_timeout) as client:

        async def probe(name: str) -> str | None:
            url, path, looks_right = probes[name]
            try:
                response = await client.get(url + path)
                return name if response.status_code == 200 and looks_right(response.json()) else None
            except (httpx.HTTPError, ValueError, AttributeError):
                return None

        answered = await asyncio.gather(*(probe(name) for name in probes))
    return {name for name in answered if name}


def default_url(engine: str) -> str:
    """Where an engine is looked for: ``CORTANA_DMR_URL`` / ``CORTANA_LLAMACPP_URL``, else its usual port."""
    if engine == "docker":
        return engine_url("docker") or DEFAULT_DMR_URL
    return engine_url("llamacpp") or DEFAULT_LLAMACPP_URL


async def _connect(
    engine: str, *, model: str | None, base_url: str | None, context_window: int | None, **options: Any
) -> ModelClient:
    keep_alive = options.pop("keep_alive", None)
    if engine == "ollama":
        if model and model.startswith("ollama:"):  # the store's name for a model Ollama itself serves
            model = model.removeprefix("ollama:")
        options.pop("api_key", None)  # Ollama has no keys
        options.pop("send_key_over_http", None)
        if keep_alive is not None:
            options["keep_alive"] = round(keep_alive)  # Ollama reads a bare number as seconds
        ollama = OllamaClient(model or "", base_url=base_url, context_window=context_window, **options)
        if not model:
            ollama.model = await _first_tool_model(ollama)
        return await _connected(ollama, ollama.connect)
    if engine == "docker":
        docker = DockerModelRunnerClient(
            model or "", base_url=base_url or default_url("docker"), context_window=context_window, **options
        )
        connected = await _connected(docker, docker.connect)
        if not docker.model:
            await docker.aclose()
            raise ModelError("Docker Model Runner has no models; pull one with `docker model pull ai/qwen2.5`.")
        return connected
    llama = LlamaCppClient(
        model or "", base_url=base_url or default_url("llamacpp"), context_window=context_window, **options
    )
    return await _connected(llama, llama.connect)


async def _connected(client: ModelClient, connect: Any) -> ModelClient:
    try:
        await connect()
    except BaseException:
        await client.aclose()
        raise
    return client


async def _first_tool_model(client: OllamaClient) -> str:
    """The first pulled Ollama model that lists the ``tools`` capability."""
    names = await client.list_models()
    for name in names:
        show = await client.http.request_json("POST", "/api/show", json_body={"model": name})
        if "tools" in (show.get("capabilities") or []):
            return str(name)
    await client.aclose()
    if not names:
        raise ModelError("Ollama has no models; pull one with `ollama pull qwen2.5-coder:1.5b`.")
    raise ModelError(
        f"None of Ollama's models ({', '.join(names)}) supports tools; pull one that does, "
        "e.g. `ollama pull qwen2.5-coder:1.5b`."
    )

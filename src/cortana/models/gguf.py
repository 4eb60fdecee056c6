"""What a GGUF model file says about itself: architecture, quantization, window, and the shape of its KV cache.

Only the header is read (the key-value metadata before the tensors), in a
few milliseconds, so ``cortana models`` can say what a file needs before the
engine loads it. A downloaded file is someone else's bytes: every length is
bounded, and a file that breaks the format is a :class:`GGUFError` that says
where, never a hang or a huge allocation.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from cortana.errors import CortanaError

__all__ = ["FILE_TYPES", "GGUFError", "GGUFHeader", "GGUFInfo", "read_gguf", "read_header"]

MAGIC = b"GGUF"
MAX_KEYS = 100_000
MAX_STRING = 16 << 20
"""The longest string value read (a chat template is a few KiB; 16 MiB is far past any real one)."""
MAX_KEPT_STRING = 64 << 10
"""Longer strings are skipped, not kept (token lists, merges)."""
MAX_ARRAY = 50_000_000
MAX_KEPT_ARRAY = 4096
"""Arrays of numbers up to this long are kept (a hybrid's KV heads per layer); longer ones only counted."""

FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS",
    20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
}  # fmt: skip
"""``general.file_type`` -> the quantization's usual name (llama.cpp's ``llama_ftype``)."""

# value type -> (struct format, size) for the fixed-size ones
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4), 6: ("<f", 4), 7: ("<?", 1),
    10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}  # fmt: skip
_STRING, _ARRAY = 8, 9

# ggml tensor type -> (bytes per block, values per block), for the types quantized files use
_BLOCKS: dict[int, tuple[int, int]] = {
    0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32), 8: (34, 32), 10: (84, 256),
    11: (110, 256), 12: (144, 256), 13: (176, 256), 14: (210, 256), 20: (18, 32), 30: (2, 1),
}  # fmt: skip
REPACKED_TYPES = frozenset({2, 12, 20})
"""Q4_0, Q4_K and IQ4_NL: the tensors llama.cpp's CPU backend copies into an interleaved layout when it loads a
model (on x86 with AVX2, as here); the copy is memory besides the mapped file."""
MAX_TENSORS = 100_000
MAX_DIMS = 8
SPLIT_NAME = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
"""How llama.cpp names the parts of a split model (``llama_split_path``): ``NAME-00002-of-00003.gguf``."""


class GGUFError(CortanaError):
    """A file that is not a GGUF model, or whose header breaks the format."""


@dataclass(frozen=True)
class GGUFInfo:
    """A GGUF file's header, as far as running it goes.

    Attributes:
        path: the file.
        size: its size in bytes (the weights, nearly all of it).
        architecture: ``general.architecture`` (``qwen2``, ``llama``…).
        name: ``general.name``, if set.
        quantization: the file type's name (``Q4_K_M``), or ``None`` if unknown.
        context_length: the window the model was trained for.
        layers: transformer blocks.
        heads: attention heads.
        kv_heads: key/value heads (fewer than ``heads`` with grouped-query attention).
        embedding: the embedding width.
        key_size: one head's key width; ``value_size`` one head's value width.
        vocabulary: tokens in the vocabulary.
        repacked: bytes of the tensors llama.cpp copies into its CPU layout on load (``REPACKED_TYPES``).
        metadata: every scalar and short string of the header, by key.
        kv_layers: the layers that keep a KV cache (a hybrid's attention layers, where the header gives KV heads
            per layer, 0 for its recurrent ones); ``None``: all of them.
        sliding_window: a sliding-window layer's span in tokens; ``sliding_layers`` how many layers use it (from
            the header's pattern, else llama.cpp's for the architecture: :data:`SLIDING_PATTERNS`).
    """

    path: Path
    size: int
    architecture: str
    name: str | None
    quantization: str | None
    context_length: int | None
    layers: int
    heads: int
    kv_heads: int
    embedding: int
    key_size: int
    value_size: int
    vocabulary: int
    repacked: int = 0
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    kv_layers: int | None = None
    sliding_window: int = 0
    sliding_layers: int = 0

    def kv_cache_bytes(self, window: int, bytes_per_value: float = 2.0) -> int:
        """The KV cache for ``window`` tokens: layers x cells x KV heads x (key + value width) x bytes (f16: 2).

        Only layers with KV heads count; a sliding-window layer holds its window plus a 512-token batch, padded to
        256 cells, as llama.cpp sizes it. A hybrid's recurrent state (a few MiB a layer) is left to the margin.
        """
        layers = self.layers if self.kv_layers is None else self.kv_layers
        cells = (layers - self.sliding_layers) * window
        if self.sliding_layers:
            cells += self.sliding_layers * min(window, -(-(self.sliding_window + 512) // 256) * 256)
        return int(cells * self.kv_heads * (self.key_size + self.value_size) * bytes_per_value)


class _Reader:
    def __init__(self, file: BinaryIO, path: Path) -> None:
        self.file = file
        self.path = path

    def take(self, size: int) -> bytes:
        data = self.file.read(size)
        if len(data) != size:
            raise GGUFError(f"{self.path}: the GGUF header ends early (at byte {self.file.tell()})")
        return data

    def scalar(self, kind: int) -> Any:
        fmt, size = _SCALARS[kind]
        return struct.unpack(fmt, self.take(size))[0]

    def length(self, limit: int, what: str) -> int:
        value = int(self.scalar(10))
        if value > limit:
            raise GGUFError(f"{self.path}: a {what} of {value:,} in the GGUF header is past the limit of {limit:,}")
        return value

    def string(self, keep: bool = True) -> str | None:
        size = self.length(MAX_STRING, "string length")
        if not keep or size > MAX_KEPT_STRING:
            self.file.seek(size, 1)
            return None
        return self.take(size).decode("utf-8", "replace")

    def value(self, kind: int) -> Any:
        """A value of type ``kind``: a scalar, a short string, a short array of numbers (a tuple), or a longer
        array's element count (contents skipped)."""
        if kind in _SCALARS:
            return self.scalar(kind)
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner = int(self.scalar(4))
            count = self.length(MAX_ARRAY, "array length")
            if inner in _SCALARS and count <= MAX_KEPT_ARRAY:
                return tuple(self.scalar(inner) for _ in range(count))
            if inner in _SCALARS:
                self.file.seek(count * _SCALARS[inner][1], 1)
            elif inner == _STRING:
                for _ in range(count):
                    self.string(keep=False)
            else:
                raise GGUFError(f"{self.path}: an array of type {inner} in the GGUF header is not supported")
            return count
        raise GGUFError(f"{self.path}: value type {kind} in the GGUF header is not part of the format")


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's header as read, before anything is asked of it (:func:`read_header`).

    Attributes:
        path: the file.
        size: its size in bytes.
        tensors: how many tensors it describes (a vocabulary-only file has none).
        metadata: every scalar and short string of the header, by key.
        repacked: bytes of its tensors that llama.cpp copies into its CPU layout on load.
    """

    path: Path
    size: int
    tensors: int
    metadata: dict[str, Any] = field(repr=False)
    repacked: int = 0

    @property
    def split(self) -> tuple[int, int] | None:
        """(this part's index from 0, the number of parts) of a model split into several files; None for one file."""
        count, number = self.metadata.get("split.count"), self.metadata.get("split.no", 0)
        if isinstance(count, bool) or not isinstance(count, int) or count <= 1:
            return None
        return (number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else 0), count

    def split_parts(self) -> list[Path] | None:
        """The files llama.cpp loads for a split model's first part, this one first (``NAME-00001-of-00003.gguf``,
        then ``NAME-00002-of-00003.gguf``… beside it); None when its own name is not in that pattern, which
        llama.cpp then refuses."""
        split = self.split
        found = SPLIT_NAME.search(self.path.name)
        if split is None or found is None or int(found.group(2)) != split[1]:
            return None
        prefix = self.path.name[: found.start()]
        return [self.path.with_name(f"{prefix}-{index:05d}-of-{split[1]:05d}.gguf") for index in range(1, split[1] + 1)]

    def not_a_model(self) -> str | None:
        """Why llama.cpp would not run this file as a chat model, in words for the user; None when it would.

        A LoRA adapter or an image projector (mmproj) is a file a model runs *with*; an importance matrix is
        data for quantizing; an embedding model (one with a pooling type, as Ollama tells them apart) writes
        no answers; a split model runs from its first part only, with every other part beside it.
        """
        kind = self.metadata.get("general.type")
        architecture = self.metadata.get("general.architecture")
        if kind == "adapter" or "adapter.type" in self.metadata:
            return (
                "a LoRA adapter, not a model: it changes a base model that is loaded with it (llama.cpp's --lora), "
                "and the embedded engine loads none; run the base model, or the adapter on its own engine"
            )
        if kind == "mmproj" or architecture == "clip":
            return (
                "an image projector (mmproj), not a model: a vision model reads images through it, and the embedded "
                "engine loads none; run the model file beside it"
            )
        if kind == "imatrix" or "imatrix.datasets" in self.metadata:
            return "an importance matrix (data for quantizing a model), not a model"
        split = self.split
        if split is not None:
            number, count = split
            parts = self.split_parts() if number == 0 else None
            if number != 0:
                first = SPLIT_NAME.sub(f"-00001-of-{count:05d}.gguf", self.path.name)
                return f"part {number + 1} of {count} of a split model: run its first part, {first} (it loads the rest)"
            if parts is None:
                return (
                    f"the first of {count} parts of a split model, under a name llama.cpp cannot find the other "
                    f"parts by (it looks for NAME-00002-of-{count:05d}.gguf beside NAME-00001-of-{count:05d}.gguf)"
                )
            missing = [part.name for part in parts[1:] if not part.is_file()]
            if missing:
                return f"the first of {count} parts of a split model, and {', '.join(missing)} is not beside it"
        if not isinstance(architecture, str):
            return "a GGUF file without general.architecture: not a model llama.cpp can run"
        if self.tensors == 0:
            return "a GGUF file without weights (a tokenizer's vocabulary only), not a model"
        if f"{architecture}.pooling_type" in self.metadata:
            return "an embedding model: it turns text into vectors and writes no answers"
        return None

    def info(self) -> GGUFInfo:
        """What this model needs to run (:class:`GGUFError` when the header lacks what that takes). The first part
        of a split model stands for the whole: size and repacked tensors are summed over every part, whose
        headers are read too."""
        size, repacked = self.size, self.repacked
        parts = self.split_parts() if self.split is not None and self.split[0] == 0 else None
        for part in (parts or [])[1:]:
            other = read_header(part)
            size, repacked = size + other.size, repacked + other.repacked
        return _info(self.path, size, self.metadata, repacked)


def read_header(path: Path | str) -> GGUFHeader:
    """The header of the GGUF file at ``path``, bounded; :class:`GGUFError` names what is wrong with a bad one."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO or a device would block or never end
            raise GGUFError(f"{path} is not a regular file")
        with path.open("rb") as raw:
            reader = _Reader(raw, path)
            if reader.take(4) != MAGIC:
                raise GGUFError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")
            version = reader.scalar(4)
            if version not in (2, 3):
                raise GGUFError(f"{path} is GGUF version {version}; versions 2 and 3 are understood")
            tensors = reader.length(MAX_TENSORS, "tensor count")
            keys = reader.length(MAX_KEYS, "key count")
            metadata: dict[str, Any] = {}
            for _ in range(keys):
                key = reader.string() or ""
                metadata[key] = reader.value(int(reader.scalar(4)))
            repacked = sum(_tensor_bytes(reader) for _ in range(tensors))
            size = os.fstat(raw.fileno()).st_size
    except OSError as error:
        raise GGUFError(f"cannot read {path}: {error.strerror or error}") from None
    kept = {key: value for key, value in metadata.items() if value is not None}
    return GGUFHeader(path, size, tensors, kept, repacked)


def read_gguf(path: Path | str) -> GGUFInfo:
    """What the GGUF file at ``path`` needs to run; :class:`GGUFError` names what is wrong with a bad one."""
    return read_header(path).info()


def _tensor_bytes(reader: _Reader) -> int:
    """Read one tensor's description; its size in bytes if llama.cpp repacks its type on load, else 0."""
    reader.string(keep=False)
    dims = int(reader.scalar(4))
    if dims > MAX_DIMS:
        raise GGUFError(f"{reader.path}: a tensor with {dims} dimensions in the GGUF header")
    values = 1
    for _ in range(dims):
        values *= int(reader.scalar(10))
    kind = int(reader.scalar(4))
    reader.scalar(10)  # offset
    if kind not in REPACKED_TYPES:
        return 0
    size, per_block = _BLOCKS[kind]
    return values * size // per_block


def _info(path: Path, size: int, metadata: dict[str, Any], repacked: int = 0) -> GGUFInfo:
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        raise GGUFError(f"{path}: the GGUF header has no general.architecture")

    def number(key: str, default: int | None = None) -> int:
        value = metadata.get(f"{architecture}.{key}", default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            if default is not None:
                return default
            raise GGUFError(f"{path}: the GGUF header has no {architecture}.{key}")
        return value

    heads_per_layer = _per_layer(metadata.get(f"{architecture}.attention.head_count"))
    heads = max(heads_per_layer) if heads_per_layer else number("attention.head_count")
    embedding = number("embedding_length")
    head_size = embedding // heads if heads else 0
    kv_per_layer = _per_layer(metadata.get(f"{architecture}.attention.head_count_kv"))
    kv_heads = max(kv_per_layer) if kv_per_layer else number("attention.head_count_kv", heads)
    sliding_window, sliding_layers = _sliding(metadata, architecture, number("block_count"))
    vocabulary = metadata.get("tokenizer.ggml.tokens")
    file_type = metadata.get("general.file_type")
    return GGUFInfo(
        path=path,
        size=size,
        architecture=architecture,
        name=metadata.get("general.name") if isinstance(metadata.get("general.name"), str) else None,
        quantization=FILE_TYPES.get(file_type) if isinstance(file_type, int) else None,
        context_length=number("context_length", 0) or None,
        layers=number("block_count"),
        heads=heads,
        kv_heads=kv_heads,
        embedding=embedding,
        key_size=number("attention.key_length", head_size),
        value_size=number("attention.value_length", head_size),
        vocabulary=vocabulary if isinstance(vocabulary, int) else number("vocab_size", 0),
        repacked=repacked,
        metadata={key: value for key, value in metadata.items() if value is not None},
        kv_layers=sum(1 for count in kv_per_layer if count) if kv_per_layer else None,
        sliding_window=sliding_window,
        sliding_layers=sliding_layers,
    )


SLIDING_PATTERNS = {"gpt-oss": 2}
"""Architectures whose sliding-window layers the header does not list: one layer in N is a full-attention one, the
rest slide (llama.cpp's ``load_swa_pattern(ml, 2)`` in ``src/models/openai-moe.cpp``: every other layer)."""


def _per_layer(value: Any) -> list[int] | None:
    """A per-layer array of counts from the header (a hybrid's KV heads, 0 for a recurrent layer), or None."""
    if isinstance(value, tuple) and value and all(isinstance(item, int) for item in value):
        return [max(int(item), 0) for item in value]
    return None


def _sliding(metadata: dict[str, Any], architecture: str, layers: int) -> tuple[int, int]:
    """(window, layers that use it): from ``attention.sliding_window`` and its pattern (a flag per layer, or one
    full layer in N), else :data:`SLIDING_PATTERNS`; a window whose pattern is unknown counts no layer (the
    estimate is then an upper bound)."""
    window = metadata.get(f"{architecture}.attention.sliding_window")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return 0, 0
    pattern = metadata.get(f"{architecture}.attention.sliding_window_pattern")
    if isinstance(pattern, tuple):
        return window, sum(1 for flag in pattern[:layers] if flag)
    every = (
        pattern if isinstance(pattern, int) and not isinstance(pattern, bool) else SLIDING_PATTERNS.get(architecture)
    )
    if not every or every < 2:
        return window, 0
    return window, sum(1 for layer in range(layers) if layer % every < every - 1)

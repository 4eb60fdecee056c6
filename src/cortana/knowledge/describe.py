"""The graph in words: what a node is, where it lives, what calls it and what it calls, with ``file:line``.

One function per answer the agent sees: :func:`describe` (the per-turn
lookup and ``explain_graph_node``), :func:`describe_resolution` (a name that
matched several definitions, or none), :func:`describe_path`,
:func:`describe_affected`, :func:`describe_god_nodes` and
:func:`describe_query`. Every list is capped and says how many it left out,
so an answer stays short enough for a small model's window.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cortana.knowledge.index import AFFECTING, CALLS, MEMBERS, Edge, GraphIndex, Node, Resolution
from cortana.knowledge.names import names_in

__all__ = [
    "describe",
    "describe_affected",
    "describe_god_nodes",
    "describe_path",
    "describe_query",
    "describe_resolution",
]

USES = AFFECTING - CALLS
_KIND_WORDS = {"symbol": "name", "external": "name defined outside the code"}


def heading(node: Node) -> str:
    """``load_defaults()`` — function at pkg/store.py:10."""
    kind = _KIND_WORDS.get(node.kind, node.kind)
    return f"{node.label} — {kind} at {node.where}"


def describe(graph: GraphIndex, node: Node, *, limit: int = 6) -> str:
    """What ``node`` is: kind and place, docstring, container, community, callers, callees, users, members."""
    lines = [heading(node) + f" (community: {node.community})"]
    summary = graph.summaries.get(node.index)
    if summary:
        lines.append(f"  doc: {summary}")
    parents = [p for p in graph.parents(node) if p.kind != "file" or node.kind == "file"]
    if parents:
        lines.append("  in: " + ", ".join(f"{p.label} ({p.where})" for p in parents[:2]))
    sections = (
        ("called by", graph.neighbours(node, CALLS, incoming=True), True),
        ("calls", graph.neighbours(node, CALLS, incoming=False), False),
        ("used by", graph.neighbours(node, USES, incoming=True), True),
        ("uses", graph.neighbours(node, USES, incoming=False), False),
        ("members" if node.kind != "file" else "defines", graph.neighbours(node, MEMBERS, incoming=False), False),
    )
    for title, pairs, at_edge in sections:
        items = _listed(pairs, at_edge=at_edge, relation=title in ("used by", "uses"))
        if items:
            lines.append(f"  {title}: " + _capped(items, limit))
    if len(lines) == 1:
        lines.append("  (no calls, uses or members found in the graph)")
    return "\n".join(lines)


def describe_resolution(name: str, resolution: Resolution, *, graph: GraphIndex, limit: int = 6) -> str:
    """The description of what ``name`` resolved to; for several definitions each one; for none the closest."""
    if not resolution.nodes:
        if not resolution.closest:
            return f"No node named '{name}' in the code graph."
        closest = ", ".join(f"{n.label} ({n.where})" for n in resolution.closest)
        return f"No node named '{name}' in the code graph. Closest: {closest}."
    if not resolution.ambiguous:
        return describe(graph, resolution.nodes[0], limit=limit)
    shown = resolution.nodes[:3]
    parts = [f"'{name}' has {len(resolution.nodes)} definitions:"]
    parts += [describe(graph, node, limit=max(2, limit // 2)) for node in shown]
    if len(resolution.nodes) > len(shown):
        parts.append("  also: " + ", ".join(n.where for n in resolution.nodes[len(shown) : 10]))
    example = resolution.nodes[0]
    parts.append(f"(Name one with path::name, e.g. '{example.file}::{example.name}'.)")
    return "\n".join(parts)


def describe_path(graph: GraphIndex, start: Node, goal: Node, *, max_hops: int = 12) -> str:
    """The shortest chain of calls, imports and containment from ``start`` to ``goal``, one hop a line."""
    chain = graph.path(start, goal, max_hops=max_hops)
    if chain is None:
        ends = f"{start.label} ({start.where}) and {goal.label} ({goal.where})"
        return f"No path of at most {max_hops} steps joins {ends}."
    if not chain:
        return f"{start.label} and {goal.label} are the same node ({start.where})."
    lines = [f"Path from {start.label} ({start.where}) to {goal.label} ({goal.where}), {len(chain)} step(s):"]
    previous = start
    for node, edge, forward in chain:
        arrow = f"--{edge.relation}-->" if forward else f"<--{edge.relation}--"
        lines.append(f"  {previous.label} {arrow} {node.label}  at {edge.where or node.where}")
        previous = node
    return "\n".join(lines)


def describe_affected(graph: GraphIndex, node: Node, *, depth: int = 2, limit: int = 40) -> str:
    """What may break if ``node`` changes: its dependents, nearest first, with where each depends on it."""
    found = graph.affected(node, depth=depth)
    if not found:
        return f"Nothing in the graph depends on {node.label} ({node.where}) within {depth} step(s)."
    files = {dependent.file for dependent, _, _ in found}
    lines = [
        f"{len(found)} node(s) in {len(files)} file(s) depend on {node.label} ({node.where}), "
        f"up to {depth} step(s) back:"
    ]
    for dependent, edge, distance in found[:limit]:
        lines.append(f"  [{distance}] {dependent.label} ({dependent.kind}) {edge.relation} at {edge.where}")
    if len(found) > limit:
        lines.append(f"  … and {len(found) - limit} more")
    return "\n".join(lines)


def describe_god_nodes(graph: GraphIndex, top: int) -> str:
    """The most connected classes and functions: the code the rest leans on."""
    ranked = graph.god_nodes(top)
    if not ranked:
        return "The graph has no classes or functions."
    lines = [f"The {len(ranked)} most connected nodes (edges in and out):"]
    lines += [
        f"  {rank}. {node.label} — {node.kind} at {node.where}, {degree} edges, community: {node.community}"
        for rank, (node, degree) in enumerate(ranked, 1)
    ]
    return "\n".join(lines)


def describe_query(graph: GraphIndex, question: str, *, depth: int = 2, budget: int = 3_000) -> str:
    """The part of the graph around what ``question`` names: nodes and edges, breadth first, within ``budget`` chars."""
    seeds = query_seeds(graph, question)
    if not seeds:
        names = names_in(question)
        guesses = [n for name in (*names.strong, *names.weak) for n in graph.closest(name, 3)]
        hint = f" Closest names: {', '.join(f'{n.label} ({n.where})' for n in guesses[:6])}." if guesses else ""
        return (
            "Nothing in the question names a node of the code graph (use exact names such as "
            f"SkillRegistry, load_defaults or store.py).{hint}"
        )
    seen = {node.index for node in seeds}
    edges: list[Edge] = []
    frontier = list(seeds)
    for _ in range(depth):
        reached: list[Node] = []
        for node in frontier:
            for incoming in (True, False):
                for other, edge in graph.neighbours(node, None, incoming=incoming):
                    if edge.relation in MEMBERS and not incoming and node.kind == "file":
                        continue  # a file's whole contents would fill the budget
                    edges.append(edge)
                    if other.index not in seen:
                        seen.add(other.index)
                        reached.append(other)
        frontier = reached
    lines = [f"Start: {', '.join(f'{n.label} ({n.where})' for n in seeds)}"]
    used = len(lines[0])
    unique = _unique(edges)
    for shown, edge in enumerate(unique):
        source, target = graph.nodes[edge.source], graph.nodes[edge.target]
        line = f"{source.label} --{edge.relation}--> {target.label}  at {edge.where}"
        if used + len(line) > budget:
            lines.append(f"… {len(unique) - shown} more edges (ask about one node to see its own)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def query_seeds(graph: GraphIndex, question: str) -> list[Node]:
    """The nodes a question starts from: the names it mentions, else its longer words that are exact names."""
    names = names_in(question)
    seeds: list[Node] = []
    for name in names.strong:
        seeds.extend(graph.find(name)[:3])
    for word in names.weak:
        seeds.extend(graph.exact_class(word)[:3])
    if not seeds:
        for word in question.replace("?", " ").replace(",", " ").split():
            if len(word) >= 4:
                seeds.extend(n for n in graph.find(word.strip("'\"`.:;!"))[:2] if n.is_code)
    return list({node.index: node for node in seeds}.values())[:6]


def _listed(pairs: Iterable[tuple[Node, Edge]], *, at_edge: bool, relation: bool) -> list[str]:
    """``label at file:line`` per neighbour (first site; ``+N sites`` for more), in graph order."""
    first: dict[int, tuple[Node, Edge]] = {}
    count: dict[int, int] = {}
    for other, edge in pairs:
        first.setdefault(other.index, (other, edge))
        count[other.index] = count.get(other.index, 0) + 1
    items = []
    for index, (other, edge) in first.items():
        where = edge.where if at_edge and edge.where else other.where
        how = f" ({edge.relation})" if relation else ""
        more = f" +{count[index] - 1} more sites" if count[index] > 1 else ""
        items.append(f"{other.label}{how} at {where}{more}")
    return items


def _capped(items: Sequence[str], limit: int) -> str:
    if len(items) <= limit:
        return "; ".join(items)
    return "; ".join(items[:limit]) + f"; … {len(items) - limit} more"


def _unique(edges: list[Edge]) -> list[Edge]:
    return list(dict.fromkeys(edges))

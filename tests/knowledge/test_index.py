"""GraphIndex on a graph the real graphify CLI built: names, files, ambiguity, neighbours, paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cortana.errors import UserError
from cortana.knowledge.graphify import graph_json
from cortana.knowledge.index import GraphIndex
from tests.knowledge.conftest import line_of


@pytest.fixture(scope="module")
def index(built: Path) -> GraphIndex:
    return GraphIndex.load(graph_json(built))


def test_a_function_resolves_to_its_file_and_line(index: GraphIndex, built: Path) -> None:
    (node,) = index.find("load_defaults")
    assert (node.kind, node.file, node.line) == (
        "function",
        "shop/registry.py",
        line_of(built / "shop/registry.py", "def load_defaults"),
    )
    assert node.where == f"shop/registry.py:{node.line}"


def test_a_class_its_methods_and_a_qualified_method(index: GraphIndex) -> None:
    (registry,) = index.find("SkillRegistry")
    assert registry.kind == "class"
    (method,) = index.find("SkillRegistry.lookup")
    assert method.kind == "method" and method.file == "shop/registry.py"
    assert [parent.name for parent in index.parents(method)] == ["SkillRegistry"]


def test_a_name_with_two_definitions_is_ambiguous(index: GraphIndex) -> None:
    resolution = index.resolve("lookup")
    assert resolution.ambiguous
    assert sorted(node.file for node in resolution.nodes) == ["shop/catalog.py", "shop/registry.py"]
    assert [n.file for n in index.find("shop/catalog.py::lookup")] == ["shop/catalog.py"]


def test_files_by_name_path_and_module(index: GraphIndex) -> None:
    assert [n.file for n in index.find("catalog.py")] == ["shop/catalog.py"]
    assert [n.file for n in index.find("shop/catalog.py")] == ["shop/catalog.py"]
    assert [n.file for n in index.find("shop.catalog")] == ["shop/catalog.py"]


def test_a_name_in_another_language(index: GraphIndex) -> None:
    (node,) = index.find("formatName")
    assert (node.file, node.line) == ("web/format.js", 1)
    callers = [other.name for other, _ in index.neighbours(node, frozenset({"calls"}), incoming=True)]
    assert callers == ["greet"]


def test_an_unknown_name_gives_the_closest_ones(index: GraphIndex) -> None:
    resolution = index.resolve("load_default")
    assert not resolution.nodes
    assert "load_defaults" in [n.name for n in resolution.closest]


def test_affected_follows_callers_back(index: GraphIndex) -> None:
    (node,) = index.find("price_total")
    found = {(dependent.name, distance) for dependent, _, distance in index.affected(node, depth=2)}
    assert ("checkout", 1) in found and ("run", 2) in found


def test_path_between_two_functions(index: GraphIndex) -> None:
    chain = index.path(index.find("run")[0], index.find("load_defaults")[0])
    assert chain is not None
    assert [node.name for node, _, _ in chain] == ["build_app", "load_defaults"]


@pytest.mark.parametrize(
    ("text", "cause"),
    [("{not json", "not valid JSON"), ('{"links": []}', "no 'nodes' list"), ("[1, 2]", "no 'nodes' list")],
)
def test_a_broken_graph_file_is_a_clear_error(tmp_path: Path, text: str, cause: str) -> None:
    path = tmp_path / "graph.json"
    path.write_text(text)
    with pytest.raises(UserError, match=cause):
        GraphIndex.load(path)


def test_hostile_labels_are_made_printable_and_bounded() -> None:
    data = {
        "nodes": [
            {"id": "a", "label": "evil\x1b[2J()" + "x" * 500, "source_file": "a.py", "source_location": "L1"},
            {"id": "b", "label": "b()", "source_file": "a.py", "source_location": "L9"},
        ],
        "links": [{"source": "b", "target": "a", "relation": "calls"}, {"source": "a", "target": "zz"}],
    }
    index = GraphIndex.from_data(json.loads(json.dumps(data)))
    label = index.nodes[0].label
    assert "\x1b" not in label and "\\x1b" in label and len(label) <= 120
    assert len(index.edges) == 1  # the link to a missing node is dropped

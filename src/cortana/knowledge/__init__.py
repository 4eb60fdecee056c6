"""The code knowledge graph: a graphify graph of the workspace, joined to an agent's turns.

knowledge/graph.py      KnowledgeGraph: the turn extension (context, tools, rebuilds)
knowledge/files.py      NamedFiles: the files a message names, shown in its turn's context
knowledge/search.py     PromptSearch: the workspace lines a message's distinctive words are on
knowledge/graphify.py   the graphify CLI: finding it, `graphify update`, .graphifyignore's managed block
knowledge/index.py      GraphIndex: graph.json loaded and indexed by name and by file
knowledge/names.py      which words of a prompt are names of code
knowledge/describe.py   the graph in words, with file:line sources

Names are imported on first use (PEP 562), so the terminal can start a graph's
build without the modules only a turn needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cortana.lazy import lazy_names

if TYPE_CHECKING:
    from cortana.knowledge.files import NamedFiles
    from cortana.knowledge.graph import GraphStatus, KnowledgeGraph
    from cortana.knowledge.index import GraphIndex
    from cortana.knowledge.search import PromptSearch

__all__ = ["GraphIndex", "GraphStatus", "KnowledgeGraph", "NamedFiles", "PromptSearch"]

_LAZY = {
    "GraphIndex": "cortana.knowledge.index",
    "GraphStatus": "cortana.knowledge.graph",
    "KnowledgeGraph": "cortana.knowledge.graph",
    "NamedFiles": "cortana.knowledge.files",
    "PromptSearch": "cortana.knowledge.search",
}


__getattr__ = lazy_names(__name__, _LAZY)

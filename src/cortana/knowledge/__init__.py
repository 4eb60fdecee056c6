"""The code knowledge graph: a graphify graph of the workspace, joined to an agent's turns.

knowledge/graph.py      KnowledgeGraph: the turn extension (context, tools, rebuilds)
knowledge/files.py      NamedFiles: the files a message names, shown in its turn's context
knowledge/search.py     PromptSearch: the workspace lines a message's distinctive words are on
knowledge/graphify.py   the graphify CLI: finding it, `graphify update`, .graphifyignore's managed block
knowledge/index.py      GraphIndex: graph.json loaded and indexed by name and by file
knowledge/names.py      which words of a prompt are names of code
knowledge/describe.py   the graph in words, with file:line sources
"""

from cortana.knowledge.files import NamedFiles
from cortana.knowledge.graph import GraphStatus, KnowledgeGraph
from cortana.knowledge.index import GraphIndex
from cortana.knowledge.search import PromptSearch

__all__ = ["GraphIndex", "GraphStatus", "KnowledgeGraph", "NamedFiles", "PromptSearch"]

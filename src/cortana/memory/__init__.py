"""Memory providers: thread history, long-term context, working memory."""

from cortana.memory.base import InMemoryHistory, MemoryProvider, MemoryResolver, ThreadRef, resolve_memory

__all__ = ["InMemoryHistory", "MemoryProvider", "MemoryResolver", "ThreadRef", "resolve_memory"]

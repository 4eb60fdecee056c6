"""Where tool functions run: async ones on the event loop, sync ones in Cortana's own thread pool.

A slow sync tool never blocks the event loop. The pool is Cortana's own (not
asyncio's default, which is sized from the CPU count) so that
``max_parallel_tools``, not the core count, bounds how many run at once.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["is_async_callable", "run_in_tool_thread"]

MAX_TOOL_THREADS = 64
_executor: ThreadPoolExecutor | None = None


def _tool_executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=MAX_TOOL_THREADS, thread_name_prefix="cortana-tool")
    return _executor


async def run_in_tool_thread(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync ``function(**kwargs)`` in the tool pool and await its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_tool_executor(), functools.partial(function, **kwargs))


def is_async_callable(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` returns a coroutine (partials and objects with an async ``__call__`` too)."""
    while isinstance(function, functools.partial):
        function = function.func
    call_method = getattr(type(function), "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call_method)

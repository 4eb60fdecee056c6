"""Where tool functions run: async ones on the event loop, sync ones in Cortana's own thread pool.

A slow sync tool never blocks the event loop. The pool is Cortana's own (not
asyncio's default, which is sized from the CPU count) so that
``max_parallel_tools``, not the core count, bounds how many run at once. Its
threads are daemon threads: a thread cannot be stopped, so a sync tool stuck
past its timeout (its result already dropped) would otherwise hold the
process at exit until it returned (``ThreadPoolExecutor`` joins its workers
then); with daemon threads the process exits as soon as the answer is out.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

__all__ = ["ToolThreads", "is_async_callable", "run_in_tool_thread"]

MAX_TOOL_THREADS = 64
P = ParamSpec("P")
T = TypeVar("T")


class ToolThreads(Executor):
    """A pool of daemon threads, started as work comes (at most ``max_workers``), never joined at exit."""

    def __init__(self, max_workers: int = MAX_TOOL_THREADS, name: str = "cortana-tool") -> None:
        self.max_workers = max_workers
        self.name = name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on a pool thread."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the tool thread pool is shut down")
            self._work.put((future, functools.partial(fn, *args, **kwargs)))
            # The call is an idle thread's (it is counted busy from now, not when it wakes: a thread between taking
            # a call and saying so would otherwise count as idle, and the next call waited for one to finish), or
            # a new thread's; at the bound it waits for one to finish.
            if self._idle:
                self._idle -= 1
            elif self._threads < self.max_workers:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self.name}-{self._threads}", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as error:  # handed to the awaiting caller, like ThreadPoolExecutor
                    future.set_exception(error)
                else:
                    future.set_result(result)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end (a busy one ends when its call returns). Never waits."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._work.put(None)


_executor: ToolThreads | None = None


def _tool_executor() -> ToolThreads:
    global _executor
    if _executor is None:
        _executor = ToolThreads()
    return _executor


SETTLE_SECONDS = 2.0
"""How long a cancelled caller waits for the sync call it interrupted (a thread cannot be stopped): a file tool's
write lands before the turn ends, so what a front end restores after a cancel is not overwritten after it."""


async def run_in_tool_thread(function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync ``function(**kwargs)`` in the tool pool, in the caller's context (its context variables, as
    ``asyncio.to_thread`` does), and await its result. Cancelled, it waits up to ``SETTLE_SECONDS`` for the call
    to return before it raises."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future = loop.run_in_executor(_tool_executor(), functools.partial(context.run, function, **kwargs))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait({future}, timeout=SETTLE_SECONDS)
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the caller is gone, so nobody else will
        raise


def is_async_callable(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` returns a coroutine (partials and objects with an async ``__call__`` too)."""
    while isinstance(function, functools.partial):
        function = function.func
    call_method = getattr(type(function), "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call_method)

"""Cortana's tool thread pool: every call it is given while it has room runs at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

from cortana.tools.executor import ToolThreads


def _warm(pool: ToolThreads, threads: int) -> None:
    """Leave ``threads`` idle threads in ``pool`` (as earlier tool calls do)."""
    started = threading.Barrier(threads + 1, timeout=5)
    futures = [pool.submit(started.wait) for _ in range(threads)]
    started.wait()
    wait(futures, timeout=5)
    deadline = time.monotonic() + 5
    while pool._idle < threads and time.monotonic() < deadline:  # each worker back at the queue
        time.sleep(0.001)


def test_calls_beyond_the_idle_threads_still_run_at_once() -> None:
    """Four calls given to a pool with three idle threads all run together: one more thread starts, even while the
    idle ones are between taking a call and saying so (before, a call waited for another to finish within 200
    tries)."""
    for _ in range(200):
        pool = ToolThreads(max_workers=8)
        try:
            _warm(pool, 3)
            together = threading.Barrier(4, timeout=2)
            futures = [pool.submit(together.wait) for _ in range(4)]
            done, _ = wait(futures, timeout=5)
            assert all(future.exception() is None for future in done) and len(done) == 4, "a call waited"
        finally:
            pool.shutdown()


def test_never_more_threads_than_its_bound() -> None:
    pool = ToolThreads(max_workers=2)
    try:
        running: list[int] = []
        most = 0
        lock = threading.Lock()

        def work() -> None:
            nonlocal most
            with lock:
                running.append(1)
                most = max(most, len(running))
            time.sleep(0.02)
            with lock:
                running.pop()

        wait([pool.submit(work) for _ in range(8)], timeout=5)
        assert most == 2
        assert pool._threads == 2
    finally:
        pool.shutdown()

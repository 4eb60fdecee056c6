"""``fix_with_tests``: the fix workflow as a tool an agent's loop can call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cortana.messages import ThreadRef
from cortana.tools import RunContext, Tool

__all__ = ["fix_tool"]


def fix_tool(fix: Callable[[str, ThreadRef], Awaitable[str]]) -> Tool:
    """``fix_with_tests``, calling ``fix(request, thread)`` (the assistant's door) and answering with its answer.

    Allowed without asking: it runs the tests confined in a scratch copy, and each file it writes is asked for.
    """

    async def fix_with_tests(request: str, context: RunContext) -> str:
        """Change the code so that the project's tests pass and the request is done: finds where, tries several
        patches in a scratch copy, keeps the one the tests accept, and writes it (asking first).

        Args:
            request: what to change, e.g. "make the failing test pass" or "add a --reverse flag".
        """
        return await fix(request, context.thread)

    return Tool(fix_with_tests, default_action="allow", timeout=3600, kind="edit")

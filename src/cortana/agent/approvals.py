"""Deferred approvals: the checks a paused run passes before it goes on, and the words of a refusal.

A run with ``defer_approvals=True`` that reaches a call a person must allow (a
tool marked ``requires_approval``, or one the permission gate would ask about)
ends the turn paused: ``RunResult.state`` (a :class:`~cortana.messages.RunState`)
holds the turn, ``RunResult.pending_approvals`` the calls that wait. The calls
of that round that need no one run first, as the OpenAI Agents SDK runs them;
nothing of the round is stored in memory until it is whole.

``Agent.resume(state, approvals)`` goes on with it, in this process or another,
after these checks, each a :class:`~cortana.errors.UserError` that names what is
wrong: every waiting call has an answer (and no other call does); the agent has
the name and the tools (names and parameters' schemas, :func:`fingerprint`) of
the one that paused; and the thread's last stored message is still the one the
run stored last before it paused, so a run resumed once already, or a thread
another turn went on with, is refused rather than run twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from cortana.errors import UserError
from cortana.memory.base import MemoryProvider
from cortana.messages import Approval, Message, RunState
from cortana.tools import Tool

__all__ = ["check_agent", "check_answers", "check_thread", "check_tools", "fingerprint", "refusal_reason"]


def fingerprint(tools: Iterable[Tool]) -> dict[str, str]:
    """Each tool's name -> a short hash of its parameters' JSON schema: what a paused run's calls were made against."""
    return {
        tool.name: hashlib.sha256(json.dumps(tool.parameters, sort_keys=True, default=str).encode()).hexdigest()[:16]
        for tool in tools
    }


def check_answers(state: RunState, approvals: Mapping[str, Approval]) -> None:
    """Refuse answers that leave a waiting call unanswered, name a call that is not waiting, or are not an answer."""
    waiting = {pending.call_id: pending.tool for pending in state.pending}
    missing = [f"{call_id} ({tool})" for call_id, tool in waiting.items() if call_id not in approvals]
    if missing:
        raise UserError(
            f"No answer for the pending call(s) {', '.join(missing)}: pass approvals={{call_id: True | False | "
            f'"reason"}} with an answer for each of {", ".join(waiting)}.'
        )
    unknown = [call_id for call_id in approvals if call_id not in waiting]
    if unknown:
        raise UserError(
            f"The paused run is not waiting on {', '.join(map(repr, unknown))}; its pending calls are "
            f"{', '.join(waiting)}."
        )
    wrong = [call_id for call_id, answer in approvals.items() if not isinstance(answer, bool | str)]
    if wrong:
        raise UserError(f"The answer for {', '.join(wrong)} is not True, False or a reason (a string).")


def check_agent(state: RunState, name: str) -> None:
    """Refuse an agent of another name than the one that paused."""
    if state.agent != name:
        raise UserError(
            f"This run paused in agent {state.agent!r}; agent {name!r} cannot resume it. Resume it with an agent "
            "built as the one that paused it."
        )


def check_tools(state: RunState, tools: Iterable[Tool]) -> None:
    """Refuse tools other than the paused run offered: each renamed, gone, new, or with other parameters, named."""
    now = fingerprint(tools)
    changes = [
        *(f"{name!r} is gone" for name in state.tools if name not in now),
        *(f"{name!r} is new" for name in now if name not in state.tools),
        *(f"{name!r} has other parameters" for name, digest in state.tools.items() if now.get(name, digest) != digest),
    ]
    if changes:
        raise UserError(
            f"This run paused in agent {state.agent!r} with other tools: {'; '.join(changes)}. Resume it with an "
            "agent built as the one that paused it (a tool renamed shows as one gone and one new)."
        )


async def check_thread(memory: MemoryProvider, state: RunState) -> None:
    """Refuse to go on when the thread's last stored message is not the one the run stored last before it paused:
    the run went on already (resumed once before), or another turn ran in the thread since. A provider that
    stores nothing cannot tell, and is not asked to."""
    history = await memory.load_history(state.thread)
    expected = state.messages[-2] if len(state.messages) > 1 else None
    if history and (expected is None or _key(history[-1]) != _key(expected)):
        raise UserError(
            f"Thread {state.thread.thread_id!r} has moved on since this run paused: it was resumed already, or "
            "another turn ran in it. A paused run goes on once, from where it paused."
        )


def refusal_reason(answer: Approval) -> str:
    """What the model reads of a person's refusal: that the user declined, and why when they said."""
    said = answer.strip().rstrip(".") if isinstance(answer, str) else ""
    return f"the user declined: {said}." if said else "the user declined."


def _key(message: Message) -> tuple[str, str, str | None]:
    """What identifies a stored message well enough to tell the thread's last one."""
    return message.role, message.content, message.tool_call_id

"""The permission gate every tool call passes before it runs.

A gate answers each call with *allow*, *deny* (with a reason the model reads)
or *ask*. "Ask" goes to an approval callback (the CLI's prompt, or your own);
with no callback, asking means denying, and the model is told approval was
needed. Approvals may be remembered for the rest of the session.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from cortana.messages import ToolCall
    from cortana.tools.base import Tool
    from cortana.tools.context import RunContext

__all__ = ["PermissionDecision", "PermissionGate", "authorize_call"]

Action = Literal["allow", "deny", "ask"]


@dataclasses.dataclass(frozen=True, slots=True)
class PermissionDecision:
    """The gate's answer for one call.

    Attributes:
        action: ``allow``, ``deny`` or ``ask``.
        reason: why; for a denial, the model reads it.
        remember: for an approval answer, apply it to every later call of this tool in the session.
    """

    action: Action
    reason: str | None = None
    remember: bool = False

    @classmethod
    def allow(cls, *, remember: bool = False) -> PermissionDecision:
        """Let the call run."""
        return cls("allow", remember=remember)

    @classmethod
    def deny(cls, reason: str = "denied by the permission policy", *, remember: bool = False) -> PermissionDecision:
        """Refuse the call; the model is told ``reason``."""
        return cls("deny", reason, remember=remember)

    @classmethod
    def ask(cls, reason: str | None = None) -> PermissionDecision:
        """Ask the approval callback."""
        return cls("ask", reason)


CheckResult = PermissionDecision | Action | bool | None
Check = Callable[["ToolCall", "Tool", "RunContext"], CheckResult | Awaitable[CheckResult]]
Approver = Callable[["ToolCall", "Tool", str | None], PermissionDecision | bool | Awaitable[PermissionDecision | bool]]


class PermissionGate:
    """Decides whether a tool call may run.

    The decision for a call is, in order: a remembered approval or denial for
    this tool; ``check(call, tool, context)`` if given (returning ``None`` falls
    through); the first matching entry of ``rules`` (tool-name globs to
    ``allow`` / ``deny`` / ``ask``); the tool's own ``default_action`` (MCP
    tools: ``ask``); ``read_only_default`` for read-only tools; else ``default``.
    An ``ask`` goes to ``approve(call, tool, reason)``.

    Args:
        default: the action for tools no rule names.
        rules: tool-name glob -> action, e.g. ``{"write_*": "ask", "run_command": "deny"}``.
        read_only_default: the action for read-only tools that no rule names.
        check: a callable for decisions rules cannot express (paths, arguments).
        approve: asked when the decision is ``ask``; returns a decision or a bool.
    """

    def __init__(
        self,
        *,
        default: Action = "allow",
        rules: Mapping[str, Action] | None = None,
        read_only_default: Action | None = None,
        check: Check | None = None,
        approve: Approver | None = None,
    ) -> None:
        self.default: Action = default
        self.rules: dict[str, Action] = dict(rules or {})
        self.read_only_default = read_only_default
        self.check = check
        self.approve = approve
        self._remembered: dict[str, PermissionDecision] = {}

    async def decide(self, call: ToolCall, tool: Tool, context: RunContext) -> PermissionDecision:
        """The final decision for ``call``: allow or deny (asking first if needed)."""
        decision = self._remembered.get(tool.name)
        if decision is None:
            decision = await self._policy(call, tool, context)
        if decision.action == "ask":
            decision = await self._ask(call, tool, decision.reason)
            if decision.remember:
                self._remembered[tool.name] = decision
        return decision

    def static_action(self, tool: Tool) -> Action:
        """What the rules say about ``tool`` before any call: ``allow``, ``ask`` or ``deny``.

        Used to keep tools the gate would refuse away from subagents; the
        ``check`` callable and remembered answers are per call and not consulted.
        """
        for pattern, action in self.rules.items():
            if fnmatch.fnmatchcase(tool.name, pattern):
                return action
        if tool.default_action is not None:
            return tool.default_action
        if tool.read_only and self.read_only_default is not None:
            return self.read_only_default
        return self.default

    def forget(self) -> None:
        """Drop every remembered approval (a new session)."""
        self._remembered.clear()

    async def _policy(self, call: ToolCall, tool: Tool, context: RunContext) -> PermissionDecision:
        if self.check is not None:
            result = self.check(call, tool, context)
            if inspect.isawaitable(result):
                result = await result
            decision = _as_decision(result)
            if decision is not None:
                return decision
        for pattern, action in self.rules.items():
            if fnmatch.fnmatchcase(tool.name, pattern):
                return PermissionDecision(action, None if action == "allow" else f"rule '{pattern}: {action}'")
        if tool.default_action is not None:
            action = tool.default_action
            return PermissionDecision(action, None if action == "allow" else f"the tool's own default: {action}")
        if tool.read_only and self.read_only_default is not None:
            return PermissionDecision(self.read_only_default)
        return PermissionDecision(self.default, None if self.default == "allow" else f"default policy: {self.default}")

    async def _ask(self, call: ToolCall, tool: Tool, reason: str | None) -> PermissionDecision:
        if self.approve is None:
            return PermissionDecision.deny(
                f"'{tool.name}' needs approval and no one can approve it here ({reason or 'policy: ask'})"
            )
        answer: Any = self.approve(call, tool, reason)
        if inspect.isawaitable(answer):
            answer = await answer
        decision = _as_decision(answer)
        if decision is None or decision.action == "ask":
            return PermissionDecision.deny("the approver gave no answer")
        if decision.action == "deny" and decision.reason is None:
            return PermissionDecision.deny("the user declined", remember=decision.remember)
        return decision


def _as_decision(value: Any) -> PermissionDecision | None:
    if value is None or isinstance(value, PermissionDecision):
        return value
    if value is True:
        return PermissionDecision.allow()
    if value is False:
        return PermissionDecision.deny()
    if value in ("allow", "deny", "ask"):
        return PermissionDecision(value)
    raise TypeError(
        f"a permission check returned {value!r}; return a PermissionDecision, 'allow'/'deny'/'ask', a bool or None"
    )


async def authorize_call(
    gate: PermissionGate | None, call: ToolCall, tool: Tool, context: RunContext
) -> PermissionDecision:
    """Ask ``gate`` about ``call``; no gate allows everything (the library's default)."""
    if gate is None:
        return PermissionDecision.allow()
    return await gate.decide(call, tool, context)

"""The permission gate every tool call passes before it runs.

A gate answers each call with *allow*, *deny* (with a reason the model reads)
or *ask*. "Ask" goes to an approval callback (the CLI's prompt, or your own);
with no callback, asking means denying, and the model is told approval was
needed.

An answer may be remembered for the rest of the session ("always", "deny
always"), but only for its **scope**: the tool and, where the gate knows how,
a part of the arguments (writes in one folder, commands with one argv prefix
such as ``git status``). A scope may have parts (the commands of ``cd src &&
pytest | tail``): an answer remembers each part, and a later call is covered
when every one of its parts is. ``remembered()`` lists what is remembered and
``forget(index)`` drops one answer (``/permissions`` in the assistant). A
call the check marks ``every_time`` (a protected path) is asked for every
time: no rule, no ``--yes`` and no earlier "always" covers it. When rules
disagree, deny wins. One model response may ask at most
``max_asks_per_response`` times; further calls needing approval are refused,
so a response of a thousand calls cannot ask a thousand questions.
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

__all__ = ["AskBudget", "PermissionDecision", "PermissionGate", "Scope", "authorize_call"]

Action = Literal["allow", "deny", "ask"]
_STRENGTH: dict[Action, int] = {"allow": 0, "ask": 1, "deny": 2}


@dataclasses.dataclass(frozen=True, slots=True)
class PermissionDecision:
    """The gate's answer for one call.

    Attributes:
        action: ``allow``, ``deny`` or ``ask``.
        reason: why; for a denial, the model reads it.
        remember: for an approval answer, apply it to later calls in the same scope this session.
        every_time: for ``ask`` from a check: ask for this call whatever rules or earlier answers say.
        needed_approval: set by the gate: the policy said *ask*, and this is the approval's answer (given now or
            remembered), or the refusal of an ask nobody could answer (no approver, an unattended run, the
            response's asks spent). A denial with it is a refusal of kind ``approval``
            (:data:`cortana.messages.Refusal`), one without it of kind ``policy``.
    """

    action: Action
    reason: str | None = None
    remember: bool = False
    every_time: bool = False
    needed_approval: bool = False

    @classmethod
    def allow(cls, *, remember: bool = False) -> PermissionDecision:
        """Let the call run."""
        return cls("allow", remember=remember)

    @classmethod
    def deny(cls, reason: str = "denied by the permission policy", *, remember: bool = False) -> PermissionDecision:
        """Refuse the call; the model is told ``reason``."""
        return cls("deny", reason, remember=remember)

    @classmethod
    def ask(cls, reason: str | None = None, *, every_time: bool = False) -> PermissionDecision:
        """Ask the approval callback (``every_time``: even past rules and earlier answers)."""
        return cls("ask", reason, every_time=every_time)


@dataclasses.dataclass(frozen=True, slots=True)
class Scope:
    """What a remembered answer covers: every call of a tool, or the calls whose key starts like this one's.

    Attributes:
        tool: the tool's name.
        key: a path-like key (``folder:notes/drafts``, ``argv:git status``); None: every call of the tool.
        label: how the prompt names it ("write_file in notes/", "git status …").
        parts: for a call made of several parts (a list of commands), each part's scope: an answer is
            remembered for each part, and the call is covered only when each part is.
    """

    tool: str
    key: str | None = None
    label: str = ""
    parts: tuple[Scope, ...] = ()

    def pieces(self) -> tuple[Scope, ...]:
        """What an answer for this scope remembers: its parts, or the scope itself."""
        return self.parts or (self,)

    def covers(self, other: Scope) -> bool:
        """Whether an answer for this scope applies to a call in ``other`` (a scope with parts covers nothing)."""
        if self.tool != other.tool or self.parts or other.parts:
            return False
        if self.key is None:
            return True
        if other.key is None:
            return False
        if other.key == self.key:
            return True
        return self.key.startswith("folder:") and self.key != "folder:" and other.key.startswith(self.key + "/")


class AskBudget:
    """How many more approvals one model response may ask for."""

    def __init__(self, limit: int) -> None:
        self.remaining = limit
        self.limit = limit


CheckResult = PermissionDecision | Action | bool | None
Check = Callable[["ToolCall", "Tool", "RunContext"], CheckResult | Awaitable[CheckResult]]
Approver = Callable[..., PermissionDecision | bool | Awaitable[PermissionDecision | bool]]
"""``approve(call, tool, reason)`` or ``approve(call, tool, reason, scope)``: ``scope`` says what "always" covers."""
ScopeOf = Callable[["ToolCall", "Tool"], Scope | None]


class PermissionGate:
    """Decides whether a tool call may run.

    For each call, in order:

    1. ``check(call, tool, context)``: a denial is final (paths outside the workspace);
       ``ask(every_time=True)`` asks for this call whatever follows;
    2. ``rules`` (tool-name globs to ``allow`` / ``deny`` / ``ask``): of the rules that
       match, deny wins over ask, ask over allow;
    3. a remembered "deny always" for the call's scope;
    4. the check's own answer, else the rules', else the tool's ``default_action``
       (MCP tools: ``ask``), else ``read_only_default`` for read-only tools, else ``default``;
       an ``allow`` for a tool marked ``requires_approval`` becomes ``ask`` (a person must allow it);
    5. for ``ask``: a remembered "always" for the call's scope, else ``approve(...)``; in an
       unattended run (``RunContext.unattended``: nobody is there to answer) the call is refused;
       asked with ``defer=True``, the decision stays ``ask`` (pending): the run pauses for a person
       to answer later (``Agent.run(..., defer_approvals=True)``) and the approver is not called.

    Args:
        default: the action for tools no rule names.
        rules: tool-name glob -> action, e.g. ``{"write_*": "ask", "run_command": "deny"}``.
        read_only_default: the action for read-only tools that no rule names.
        check: a callable for decisions rules cannot express (paths, arguments).
        approve: asked when the decision is ``ask``; returns a decision or a bool.
        scope: what a remembered answer for a call covers (default: every call of its tool);
            ``None`` from it means answers for that call are never remembered.
        max_asks_per_response: approvals one model response may ask for.
    """

    def __init__(
        self,
        *,
        default: Action = "allow",
        rules: Mapping[str, Action] | None = None,
        read_only_default: Action | None = None,
        check: Check | None = None,
        approve: Approver | None = None,
        scope: ScopeOf | None = None,
        max_asks_per_response: int = 5,
    ) -> None:
        self.default: Action = default
        self.rules: dict[str, Action] = dict(rules or {})
        self.read_only_default = read_only_default
        self.check = check
        self.approve = approve
        self.scope = scope
        self.max_asks_per_response = max_asks_per_response
        self._remembered: list[tuple[Scope, PermissionDecision]] = []

    def scope_of(self, call: ToolCall, tool: Tool) -> Scope | None:
        """What an answer for ``call`` would cover if remembered."""
        if self.scope is not None:
            return self.scope(call, tool)
        return Scope(tool.name, None, f"every call of {tool.name}")

    async def decide(
        self, call: ToolCall, tool: Tool, context: RunContext, asks: AskBudget | None = None, *, defer: bool = False
    ) -> PermissionDecision:
        """The final decision for ``call``: allow or deny (asking first if needed); with ``defer``, an ask nothing
        remembered answers is not put to the approver but returned as it is (``ask``, ``needed_approval``):
        a person answers it later."""
        checked = await self._check(call, tool, context)
        if checked is not None and checked.action == "deny":
            return checked
        ruled = self._rule(tool)
        if ruled is not None and ruled.action == "deny":
            return ruled
        scope = self.scope_of(call, tool)
        remembered = self._recall(scope)
        if remembered is not None and remembered.action == "deny":
            return remembered
        decision = checked or ruled or self._default(tool)
        if decision.action == "allow" and tool.requires_approval:
            decision = PermissionDecision.ask(f"'{tool.name}' requires a person's approval")
        if decision.action == "allow":
            return decision
        every_time = decision.every_time
        if remembered is not None and not every_time:
            return remembered
        if context.unattended:  # an ask with nobody to answer is refused, never approved
            return PermissionDecision(
                "deny",
                f"'{tool.name}' needs the user's approval and nobody is there to give it (this turn runs on its own, "
                "e.g. a scheduled check-in); do not do it now. If the user should know, say it in your message",
                needed_approval=True,
            )
        if defer:
            return PermissionDecision("ask", decision.reason or "policy: ask", needed_approval=True)
        answer = await self._ask(call, tool, decision.reason, None if every_time else scope, asks)
        answer = dataclasses.replace(answer, needed_approval=True)
        if answer.remember and scope is not None and (answer.action == "deny" or not every_time):
            self._remembered.extend((piece, answer) for piece in scope.pieces())
        return answer

    def static_action(self, tool: Tool) -> Action:
        """What the rules say about ``tool`` before any call: ``allow``, ``ask`` or ``deny``.

        Used to keep tools the gate would refuse away from subagents; the
        ``check`` callable and remembered answers are per call and not consulted.
        """
        action = (self._rule(tool) or self._default(tool)).action
        return "ask" if action == "allow" and tool.requires_approval else action

    def remembered(self) -> list[tuple[Scope, PermissionDecision]]:
        """The answers remembered this session, oldest first: each with the scope it covers."""
        return list(self._remembered)

    def forget(self, index: int | None = None) -> None:
        """Drop the remembered answer at ``index`` (as :meth:`remembered` lists them), or every one (a new session).

        Raises:
            IndexError: there is no answer at ``index``.
        """
        if index is None:
            self._remembered.clear()
            return
        if not 0 <= index < len(self._remembered):
            raise IndexError(f"no remembered answer {index + 1}; there are {len(self._remembered)}")
        del self._remembered[index]

    async def _check(self, call: ToolCall, tool: Tool, context: RunContext) -> PermissionDecision | None:
        if self.check is None:
            return None
        result = self.check(call, tool, context)
        if inspect.isawaitable(result):
            result = await result
        return _as_decision(result)

    def _rule(self, tool: Tool) -> PermissionDecision | None:
        matching = [
            (pattern, action) for pattern, action in self.rules.items() if fnmatch.fnmatchcase(tool.name, pattern)
        ]
        if not matching:
            return None
        pattern, action = max(matching, key=lambda item: _STRENGTH[item[1]])
        return PermissionDecision(action, None if action == "allow" else f"rule '{pattern}: {action}'")

    def _default(self, tool: Tool) -> PermissionDecision:
        if tool.default_action is not None:
            action = tool.default_action
            return PermissionDecision(action, None if action == "allow" else f"the tool's own default: {action}")
        if tool.read_only and self.read_only_default is not None:
            return PermissionDecision(self.read_only_default)
        return PermissionDecision(self.default, None if self.default == "allow" else f"default policy: {self.default}")

    def _recall(self, scope: Scope | None) -> PermissionDecision | None:
        """The remembered answer for ``scope``: a denial of any part, else an approval covering every part."""
        if scope is None:
            return None
        answers = [self._recall_one(piece) for piece in scope.pieces()]
        denied = next((answer for answer in answers if answer is not None and answer.action == "deny"), None)
        if denied is not None:
            return denied
        if all(answer is not None and answer.action == "allow" for answer in answers):
            return answers[0]
        return None

    def _recall_one(self, scope: Scope) -> PermissionDecision | None:
        for remembered, decision in reversed(self._remembered):
            if remembered.covers(scope):
                return decision
        return None

    async def _ask(
        self, call: ToolCall, tool: Tool, reason: str | None, scope: Scope | None, asks: AskBudget | None
    ) -> PermissionDecision:
        if self.approve is None:
            return PermissionDecision.deny(
                f"'{tool.name}' needs approval and no one can approve it here ({reason or 'policy: ask'})"
            )
        if asks is not None:
            if asks.remaining <= 0:
                return PermissionDecision.deny(
                    f"this response already asked for {asks.limit} approvals; do fewer things at a time and ask again"
                )
            asks.remaining -= 1
        answer: Any = (
            self.approve(call, tool, reason, scope) if _takes_scope(self.approve) else self.approve(call, tool, reason)
        )
        if inspect.isawaitable(answer):
            answer = await answer
        decision = _as_decision(answer)
        if decision is None or decision.action == "ask":
            return PermissionDecision.deny("the approver gave no answer")
        if decision.action == "deny" and decision.reason is None:
            return PermissionDecision.deny("the user declined", remember=decision.remember)
        return decision


def _takes_scope(approve: Approver) -> bool:
    """Whether the approver takes the fourth argument, ``scope`` (older approvers take three)."""
    try:
        parameters = list(inspect.signature(approve).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 4 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


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


_NO_GATE = PermissionGate()
"""What decides for a tool that ``requires_approval`` in a run with no gate: it asks, and it has nobody to ask (no
approver, so it never remembers an answer either: one instance serves every run)."""


async def authorize_call(
    gate: PermissionGate | None,
    call: ToolCall,
    tool: Tool,
    context: RunContext,
    asks: AskBudget | None = None,
    *,
    defer: bool = False,
) -> PermissionDecision:
    """Ask ``gate`` about ``call`` (``defer``: see :meth:`PermissionGate.decide`); no gate allows everything (the
    library's default) but a tool that ``requires_approval``: that call is refused, or with ``defer`` pending."""
    if gate is None:
        if not tool.requires_approval:
            return PermissionDecision.allow()
        gate = _NO_GATE
    return await gate.decide(call, tool, context, asks, defer=defer)

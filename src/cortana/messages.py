"""The stable internal format: messages, tool calls, run results and metrics.

Every engine adapter converts its wire format into these models and nothing
else leaves an adapter, so the loop, memory and the CLI never see an engine's
own response objects.
"""

from __future__ import annotations

from typing import Any, Generic, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

__all__ = [
    "CHECK_IN_NAME",
    "LOOP_NAME",
    "STAND_IN_NAMES",
    "Approval",
    "Message",
    "OutputT",
    "PendingApproval",
    "Refusal",
    "Role",
    "RunMetrics",
    "RunResult",
    "RunState",
    "RunStatus",
    "StopReason",
    "ThreadRef",
    "ToolCall",
    "Usage",
    "is_users_own",
]

Role = Literal["system", "user", "assistant", "tool"]
Refusal = Literal["policy", "approval", "hook"]
"""Why a tool call was refused before it ran: ``policy`` a rule or check of the permission gate said no;
``approval`` it needed an approval that was not given (declined, nobody there to ask, or an approver that
cannot ask, as over an API); ``hook`` a ``before_tool`` hook of the user's said no."""

CHECK_IN_NAME = "heartbeat"
"""The ``name`` of the user-role note a delivered check-in stores in the user's place."""
LOOP_NAME = "cortana"
"""The ``name`` of a user-role message the loop writes itself (a nudge to answer, a retry of a failed call)."""
STAND_IN_NAMES = (CHECK_IN_NAME, LOOP_NAME)
"""Names of user-role messages that are not the user's words: "when the user last wrote" and what the user
said skip them."""
OutputT = TypeVar("OutputT", default=Any)
"""The type of ``RunResult.output``: ``str`` for an agent without ``output_type``, else that type. A bare
``RunResult`` is ``RunResult[Any]``; ``Agent[T].run`` returns ``RunResult[T]`` (``Agent`` infers ``T`` from
``output_type``). At run time the result is never parametrized: pydantic keeps the value as the run made it."""
StopReason = Literal["stop", "length"]
"""Why a run ended: ``stop`` the model finished its answer; ``length`` it hit the token limit."""
RunStatus = Literal["done", "paused"]
"""How a run ended: ``done`` with its answer; ``paused`` at tool calls a person must allow first
(``defer_approvals=True``): ``RunResult.state`` goes on with it (``Agent.resume``)."""
Approval = bool | str
"""A person's answer to a pending call: ``True`` runs it; ``False`` refuses it; a string refuses it and tells the
model why."""


class ToolCall(BaseModel):
    """One tool call requested by the model.

    Attributes:
        id: the call's id, unique within the run; tool results refer to it.
        name: the tool's name, as the model wrote it.
        arguments: the parsed arguments. Empty when they did not parse.
        raw_arguments: the argument text exactly as the model wrote it, kept
            when it did not parse as a JSON object so the model can be shown its mistake.
        from_text: the model wrote this call as text and Cortana recovered it
            (the engine returned no structured call).
        extra: a further call the model added to a guided answer after the one it
            set out to make (``cortana.models.guided``); the loop runs it only when
            the conversation holds every argument it can check.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    from_text: bool = False
    extra: bool = False


class Message(BaseModel):
    """One chat message in Cortana's own format.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text. For a tool message, the tool's result as text.
        tool_calls: the calls an assistant message requests.
        tool_call_id: for a tool message, the id of the call it answers.
        name: for a tool message, the tool's name.
        thinking: the model's reasoning text, when the engine separates it.
        is_error: for a tool message, whether the tool failed.
        refusal: for a tool message, why the call was refused before it ran (``None``: it was not refused);
            a refused call also has ``is_error``, and its text says why to the model.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    thinking: str | None = None
    is_error: bool = False
    refusal: Refusal | None = None

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message."""
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        """An assistant message, optionally requesting tool calls."""
        return cls(role="assistant", content=content, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        """The result of ``call``."""
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=is_error)


class Usage(BaseModel):
    """Token counts one model call reported.

    Attributes:
        prompt_tokens: tokens in the prompt, cached ones included.
        completion_tokens: tokens the model generated.
        cached_tokens: prompt tokens the engine reused from its cache instead of re-reading.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def processed_prompt_tokens(self) -> int:
        """Prompt tokens the engine actually had to read (not served from cache)."""
        return max(self.prompt_tokens - self.cached_tokens, 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class RunMetrics(BaseModel):
    """What one run cost. Times are seconds.

    Attributes:
        elapsed: wall time of the whole run.
        model_time: wall time spent waiting for the model.
        tool_time: wall time spent running tool batches (parallel calls overlap).
        model_calls: requests sent to the model.
        tool_calls: tool calls the model requested (run, denied or failed).
        tool_errors: tool calls that ended in an error result.
        unknown_tool_calls: calls of a tool that was not offered (nor in a group that could be loaded): never started;
            the model reads that no such tool exists.
        subagent_spawns: subagents started during the run.
        subagent_prompt_tokens: prompt tokens the run's subagents used.
        subagent_completion_tokens: tokens the run's subagents generated.
        compactions: times the conversation was summarized to fit the context window.
        output_calls: model calls that asked for the typed answer (``output_type``) after the agent's own
            answer: the answer as JSON, or again after a value that did not validate. Counted in ``model_calls``.
        prompt_tokens: prompt tokens over all model calls.
        completion_tokens: generated tokens over all model calls.
        cached_prompt_tokens: prompt tokens the engine served from its cache.
    """

    elapsed: float = 0.0
    model_time: float = 0.0
    tool_time: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    unknown_tool_calls: int = 0
    subagent_spawns: int = 0
    subagent_prompt_tokens: int = 0
    subagent_completion_tokens: int = 0
    compactions: int = 0
    output_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    def add_usage(self, usage: Usage) -> None:
        """Count one model call's tokens."""
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_prompt_tokens += usage.cached_tokens

    def merge(self, other: RunMetrics) -> RunMetrics:
        """A new ``RunMetrics`` with every count of ``self`` and ``other`` summed."""
        return RunMetrics(**{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields})


class ThreadRef(BaseModel):
    """Who a conversation belongs to.

    Attributes:
        resource_id: the user, project or workspace that owns conversations.
        thread_id: one conversation of that resource.
    """

    model_config = ConfigDict(frozen=True)

    resource_id: str = "default"
    thread_id: str = "default"


class PendingApproval(BaseModel):
    """A tool call a paused run waits on: a person allows or refuses it (``Agent.resume(state, approvals)``).

    Attributes:
        call_id: the call's id: the key of its answer in ``approvals``.
        tool: the tool's name.
        arguments: the arguments, as the model wrote them.
        reason: why it needs a person (the tool requires approval, a rule of the permission gate asks).
    """

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class RunState(BaseModel):
    """A run paused for approvals: all it takes to go on with it, in this process or another.

    ``state.model_dump_json()`` keeps it; ``RunState.model_validate_json(text)`` reads it back; then
    ``agent.resume(state, approvals)`` on an agent built the same way (memory on the same store) finishes the turn.

    Attributes:
        version: the format's version (a state of another version is refused).
        agent: the name of the agent that ran it; only an agent of that name resumes it.
        tools: every tool the run offered: its name -> a hash of its parameters' schema. An agent whose tools
            differ (one renamed, gone, added, or with other parameters) cannot resume it.
        thread: the conversation.
        prompt: the user's message as the caller gave it.
        messages: what the model was shown, in order (system prompt, history, the turn's user message with its
            context, the turn's rounds so far), ending with the assistant message whose calls wait. Nothing of
            that round is in memory yet: it is stored whole, results in request order, when the run goes on.
        turn_start: index in ``messages`` of the turn's first message still there (see ``summarized``).
        summarized: the turn's first messages, when a compaction took them out of ``messages`` (usually none).
        results: the results of the paused round's calls that did not wait (they ran, or were refused, before it
            paused); they do not run again.
        pending: the calls that wait for a person's answer.
        iterations: rounds of tool calls spent; ``iteration_limit``: how many the run may spend.
        metrics: what the run cost so far.
        changed_by: the tools that ran and are not read-only, so far.
        loaded_groups: the tool groups the run loaded (loaded again when it goes on).
        settings: the turn's generation settings (``ModelSettings``' fields).
        remember: whether the turn is stored in memory.
        once: the loop's once-only steps already taken (``nudged``, ``asked_again``, ``retried``).
    """

    version: Literal[1] = 1
    agent: str
    tools: dict[str, str]
    thread: ThreadRef
    prompt: str
    messages: list[Message]
    turn_start: int
    summarized: list[Message] = Field(default_factory=list)
    results: list[Message] = Field(default_factory=list)
    pending: list[PendingApproval]
    iterations: int
    iteration_limit: int
    metrics: RunMetrics
    changed_by: list[str] = Field(default_factory=list)
    loaded_groups: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    remember: bool = True
    once: list[Literal["nudged", "asked_again", "retried"]] = Field(default_factory=list)


class RunResult(BaseModel, Generic[OutputT]):
    """The outcome of one completed run; ``RunResult[T]``: one whose ``output`` is a ``T``.

    Attributes:
        output: the model's final answer text; with ``Agent(output_type=...)``, the validated value.
        new_messages: every message this run added (user message first).
        metrics: what the run cost.
        thread: the conversation the run belongs to.
        stop_reason: why the final model call ended.
        changed_by: the names of the tools that ran in this turn and are not read-only (writes,
            edits, commands, outside servers' tools), in the order they ran: what may have
            changed the workspace. Empty when the turn only read.
        prompt: the user's message as the caller gave it (``new_messages[0]`` also holds the turn's context).
        status: ``done``; or ``paused`` at calls a person must allow first (``defer_approvals=True``): then
            ``output`` is what the model said with its calls (``None`` with an ``output_type``), ``new_messages``
            end with the assistant message whose calls wait, and ``pending_approvals`` and ``state`` are set.
        pending_approvals: the calls the paused run waits on (empty when it is done).
        state: the paused run, to go on with (``Agent.resume``); ``None`` when it is done.
    """

    output: OutputT
    new_messages: list[Message]
    metrics: RunMetrics
    thread: ThreadRef
    stop_reason: StopReason = "stop"
    changed_by: list[str] = Field(default_factory=list)
    prompt: str = ""
    status: RunStatus = "done"
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    state: RunState | None = None


def is_users_own(message: Message) -> bool:
    """Whether ``message`` is the user's own words: a user-role message that is no stand-in (a check-in's note,
    the loop's nudge or retry; see ``STAND_IN_NAMES``). Memory's ``last_user_message_at`` asks the same of
    stored rows in SQL, by the same names."""
    return message.role == "user" and message.name not in STAND_IN_NAMES

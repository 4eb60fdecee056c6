"""``Run``: the state of one turn, and each step of the lifecycle as a method.

``agent/loop.py`` reads top to bottom through these steps; everything a step
needs is on the run (transcript, metrics, toolbox, iteration budget, window),
so no helper takes a handful of loose variables, and a step's verdict is a
small type (:class:`Screened`), not a string.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

from cortana.agent.approvals import check_agent, check_answers, check_thread, check_tools, fingerprint
from cortana.agent.compaction import compact, estimate_tokens, measure
from cortana.agent.events import ModelCallFinished, ModelCallStarted, PartialOutput, RunEvent, TextDelta
from cortana.agent.extensions import (
    BackgroundWork,
    MemoryTurn,
    TurnExtension,
    TurnScope,
    extension_tools,
    gather_context_of,
    looks_up_workspace,
    turn_settings,
)
from cortana.agent.fitting import fit_prompt
from cortana.agent.grounding import Evidence, conversation_evidence, is_grounded, is_grounded_addition
from cortana.agent.output import OutputSpec, OutputValidationError, output_spec
from cortana.agent.recorder import Recorder
from cortana.agent.run_config import RunConfig, RunDeps
from cortana.agent.tool_calls import CallRunner
from cortana.agent.toolbox import Toolbox
from cortana.agent.tracing import RunTracer
from cortana.config import compaction_threshold, effective_context_window
from cortana.display import valid_text
from cortana.errors import MaxToolIterationsError, ModelError
from cortana.memory.base import MemoryProvider, resolve_memory
from cortana.messages import LOOP_NAME, Approval, Image, Message, RunMetrics, RunResult, RunState, ThreadRef, ToolCall
from cortana.models.base import CallJudge, ModelClient, ModelRequest, ModelResponse, ModelSettings, ToolSpec
from cortana.models.toolparse import recover_tool_calls
from cortana.prompts import as_data, prompt_text
from cortana.streams import closing
from cortana.tools import RunContext, Tool, ToolGroup, as_tools

__all__ = ["EXTRA_MODEL_CALLS", "IterationBudget", "Run", "Screened", "TurnRequest", "Verdict"]

log = logging.getLogger(__name__)

EXTRA_MODEL_CALLS = 6
"""Model calls a run may make besides one per round of tool calls: the answer, and at most once each the nudge,
asking again, the retry, the answer without tools, with one to spare. No path of the loop needs more."""


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What the caller asked for: the prompt, the conversation it belongs to, and how to run it.

    Attributes:
        prompt: the user's message.
        thread: the conversation.
        context: the caller's per-turn context (last in the ``<context>`` block).
        history: earlier messages to send before this turn (for callers without memory).
        settings: generation settings for the turn's model calls.
        remember: store the turn in memory; ``False`` reads the history and stores nothing of the turn.
        unattended: nobody is there to approve tool calls: the ones the gate would ask about are refused.
        extensions: the turn extensions of this turn instead of the agent's (``None``: the agent's).
        use_tools: offer tools to the model; ``False``: it answers in text.
        streamed: someone reads the answers as they arrive (``run_stream``); ``False`` (``run``): the engine
            may send each whole (:attr:`ModelRequest.streamed`).
        defer_approvals: a call a person must allow ends the turn paused (``RunResult.state``), not asked now.
        paused: go on with this paused run (``Agent.resume``) instead of starting a turn; ``prompt``, ``thread``
            and ``remember`` are its own.
        approvals: the answers for the paused run's waiting calls (call id -> ``True``, ``False`` or a reason).
        images: the images the user's message shows the model (stored with it).
        recorder: a durable run's (``cortana.durable``): the model calls, tool calls, the gate's decisions, compactions
            and memory go through it, so a run whose process died is replayed from its record.
    """

    prompt: str
    thread: ThreadRef
    context: str | None = None
    history: Sequence[Message] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    remember: bool = True
    unattended: bool = False
    extensions: Sequence[TurnExtension] | None = None
    use_tools: bool = True
    streamed: bool = True
    defer_approvals: bool = False
    paused: RunState | None = None
    approvals: Mapping[str, Approval] = field(default_factory=dict)
    images: Sequence[Image] = ()
    recorder: Recorder | None = None

    @classmethod
    def resuming(cls, state: RunState, approvals: Mapping[str, Approval], *, streamed: bool) -> TurnRequest:
        """The request that goes on with ``state`` (it defers approvals again: it may pause again)."""
        return cls(
            state.prompt,
            state.thread,
            remember=state.remember,
            streamed=streamed,
            defer_approvals=True,
            paused=state,
            approvals=dict(approvals),
        )


class Verdict(enum.Enum):
    """What to do with a model's reply."""

    ANSWER = "answer"
    """No tool calls: the reply is the answer."""
    RUN_TOOLS = "run_tools"
    """Run the reply's tool calls."""
    NUDGE = "nudge"
    """Only repeats of answered calls: restate the question once."""
    WITHHOLD_TOOLS = "withhold_tools"
    """No grounded call, or repeats after the nudge: ask again, with no tools offered."""
    ASK_AGAIN = "ask_again"
    """An empty reply (no text, no calls), or one that only replays the text of an earlier call: ask once more."""
    RETRY = "retry"
    """Prose right after a failed call, as if the task were done or impossible: ask once to correct the call."""
    NO_SUCH_TOOL = "no_such_tool"
    """Every call names a tool that was not offered: none is started; the model answers without tools."""


@dataclass(frozen=True, slots=True)
class Screened:
    """A verdict and the reply it applies to (with calls that must not run taken out).

    ``shown`` is text the model did not stream that the user must see: the note that stands
    in for an answer that stayed empty.
    """

    verdict: Verdict
    reply: Message
    shown: str | None = None


@dataclass(slots=True)
class IterationBudget:
    """Rounds of tool calls used, and how many the run may use (``on_max_iterations`` can raise it)."""

    limit: int
    used: int = 0


@dataclass
class Turn:
    """What memory and the extensions bring to a turn before the first model call."""

    history: list[Message]
    """The caller's history, then memory's, each as the engine's model can be shown it."""
    context: list[tuple[TurnExtension, str]]
    """Each context block with the extension that gave it, in the extensions' order."""
    tools: list[Tool | ToolGroup]


@dataclass
class Run:
    """One turn of one agent: its state, and the lifecycle's steps as methods.

    It reads the agent's ``RunConfig`` snapshot and the parts resolved at the start, never the agent.
    """

    config: RunConfig
    client: ModelClient
    request: TurnRequest
    settings: ModelSettings
    """The request's settings as the extensions adjust them, less what this engine cannot take (``think`` for a
    model that does not think)."""
    memory: MemoryProvider | None
    extensions: Sequence[TurnExtension]
    """The extensions of this turn (memory's part first), called with ``scope``."""
    scope: TurnScope
    background: BackgroundWork
    toolbox: Toolbox
    transcript: list[Message]
    new_messages: list[Message]
    calls: CallRunner
    budget: IterationBudget
    window: int | None
    threshold: float
    turn_start: int
    """Index in ``transcript`` of this turn's first message kept (compaction keeps the turn)."""
    metrics: RunMetrics = field(default_factory=RunMetrics)
    response: ModelResponse | None = None
    """The latest model response."""
    withhold_tools: bool = False
    nudged: bool = False
    asked_again: bool = False
    retried: bool = False
    aside: set[int] = field(default_factory=set)
    """ids of the messages of bookkeeping rounds (``Tool.answer_after``), left out of the requests after them."""
    started: float = field(default_factory=time.perf_counter)
    output: OutputSpec | None = None
    """The output type's spec (``Agent(output_type=...)``): the run ends with a value of it."""
    output_value: Any = None
    """The typed answer, once one validated."""
    output_retries: int = 0
    """Values that failed validation and went back to the model."""
    answered: bool = False
    """The turn's answer is in (stored, in ``new_messages``); what follows asks for it as the typed value, and is
    kept only in the transcript: memory holds the user's message and the answer, never the asking for JSON."""
    tracer: RunTracer | None = None
    held: list[Message] = field(default_factory=list)
    """The results of the paused round's calls that did not wait for a person (they ran, or were refused)."""
    cut: str | None = None
    """How the user's message was cut to the window (:func:`~cortana.agent.fitting.fit_prompt`), if it was."""

    # -- start ----------------------------------------------------------------------------

    @classmethod
    async def start(cls, config: RunConfig, deps: RunDeps, request: TurnRequest) -> Run:
        """Resolve memory, gather the turn's history, context and tools; store the user message."""
        started = time.perf_counter()
        client = deps.client
        _refuse_images(client, request.images)  # before anything is stored
        window = effective_context_window(config.context_window, client.context_window)
        request, cut = await _fitted(request, client, window)
        memory, extensions, scope = await _open(deps, request)
        turn = await _gather_turn(memory, extensions, request, scope)
        tools, groups = as_tools(turn.tools)
        toolbox = Toolbox([*deps.tools, *tools], [*deps.tool_groups, *groups])
        await toolbox.load_eager()
        system_prompt = config.system_prompt(has_tools=bool(toolbox.specs()))
        past = [*([Message.system(system_prompt)] if system_prompt else []), *turn.history]
        settings = turn_settings(extensions, request.thread, request.settings, scope)
        if settings.think is not None and not client.supports_thinking:
            settings = replace(settings, think=None)
        offer = await _ToolOffer.decide(config, deps, request, toolbox.specs(), past, settings)
        user = _user_message(request, turn.context, offer.general)
        if memory is not None and request.remember:
            await memory.append_messages(request.thread, [user])
        transcript = [*past, user]
        metrics = RunMetrics()
        context = RunContext(request.thread, metrics, transcript, unattended=request.unattended, agent=deps.handle)
        return cls(
            config=config,
            client=client,
            request=request,
            settings=offer.settings,
            memory=memory,
            extensions=extensions,
            scope=scope,
            background=deps.background,
            toolbox=toolbox,
            transcript=transcript,
            new_messages=[user],
            calls=CallRunner(
                config, toolbox, context, deps.tracer, defer=request.defer_approvals, recorder=request.recorder
            ),
            budget=IterationBudget(config.max_tool_iterations),
            window=window,
            threshold=compaction_threshold(config.compaction_threshold) if window else 1.0,
            turn_start=len(past),
            metrics=metrics,
            withhold_tools=offer.withhold,
            started=started,
            output=offer.spec,
            tracer=deps.tracer,
            cut=cut,
        )

    @classmethod
    async def resume(cls, config: RunConfig, deps: RunDeps, request: TurnRequest) -> Run:
        """Go on with the run ``request.paused`` holds, on this agent's parts, once they pass the checks of
        ``agent/approvals.py``: its transcript, budget, metrics and flags as they were; nothing stored again.

        Raises:
            UserError: an answer missing (naming the calls), another agent (naming what changed), or a thread
                that moved on since the pause.
        """
        state = request.paused
        assert state is not None, "a request to resume holds the paused run"
        memory, extensions, scope, toolbox = await _checked_parts(config, deps, request, state)
        transcript = list(state.messages)
        metrics = state.metrics.model_copy()
        window = effective_context_window(config.context_window, deps.client.context_window)
        context = RunContext(request.thread, metrics, transcript, agent=deps.handle)
        run = cls(
            config=config,
            client=deps.client,
            request=request,
            settings=ModelSettings(**state.settings),
            memory=memory,
            extensions=extensions,
            scope=scope,
            background=deps.background,
            toolbox=toolbox,
            transcript=transcript,
            new_messages=[*state.summarized, *transcript[state.turn_start :]],
            calls=CallRunner(config, toolbox, context, deps.tracer, defer=True),
            budget=IterationBudget(state.iteration_limit, state.iterations),
            window=window,
            threshold=compaction_threshold(config.compaction_threshold) if window else 1.0,
            turn_start=state.turn_start,
            metrics=metrics,
            started=time.perf_counter() - metrics.elapsed,
            output=output_spec(config.output_type) if config.output_type is not None else None,
            tracer=deps.tracer,
            held=list(state.results),
        )
        run.nudged, run.asked_again, run.retried = (name in state.once for name in _ONCE)
        run.calls.recall(run.new_messages)
        run.calls.changed_by.extend(state.changed_by)
        return run

    @property
    def thread(self) -> ThreadRef:
        """The conversation this turn belongs to."""
        return self.request.thread

    @property
    def paused(self) -> bool:
        """Whether the last round's calls include some that wait for a person (the run ends paused)."""
        return bool(self.calls.pending)

    # -- the steps ------------------------------------------------------------------------

    def offered_tools(self) -> list[ToolSpec]:
        """The tools the next model call offers (none while the model must answer in text)."""
        return [] if self.withhold_tools else self.toolbox.specs()

    async def fit_window(self) -> None:
        """Compact the transcript in place when the prompt reaches ``threshold`` x the window.

        Keeps the current turn, or when the turn alone is too big, its newest half-window.
        """
        if not self.window:
            return
        tools = self.offered_tools()
        if await measure(self.client, self.transcript, tools) < self.threshold * self.window:
            return
        keep_from = _recent_start(self.transcript, tools, budget=self.window // 2, floor=self.turn_start)
        first = 1 if self.transcript and self.transcript[0].role == "system" else 0
        if keep_from <= first:
            return  # nothing older to summarize; the engine will say if it cannot fit
        summarize = partial(compact, self.client, self.transcript, keep_from=keep_from, window=self.window)
        recorder = self.request.recorder
        result = await (summarize() if recorder is None else recorder.compaction(summarize))
        self.transcript[:] = result.messages  # in place: tools see the same list through RunContext
        self.metrics.compactions += 1
        if self.memory is not None and self.request.remember:
            await self.memory.add_summary(self.thread, result.summary, kept=result.kept)
        self.turn_start = len(self.transcript) - result.kept

    def check_calls(self) -> None:
        """Refuse a model call past ``EXTRA_MODEL_CALLS`` more than the rounds of tool calls the run may make.

        Every call counts, whatever its reply: the nudge, the retry, asking again and the answer without tools
        spend no round of tool calls, and an engine that keeps answering the same way must still end the run.

        Raises:
            MaxToolIterationsError: with every message of the run (the transcript is whole at this point).
        """
        allowed = self.budget.limit + EXTRA_MODEL_CALLS
        if self.output is not None:
            allowed += self.config.output_retries + 1  # asking for the typed answer, and again per retry
        if self.metrics.model_calls < allowed:
            return
        self.metrics.elapsed = time.perf_counter() - self.started
        raise MaxToolIterationsError(
            f"The run made {self.metrics.model_calls} model calls without an answer (at most {allowed}: "
            f"max_tool_iterations={self.budget.limit} rounds of tool calls and {EXTRA_MODEL_CALLS} more); the engine "
            "kept answering with tool calls it was not offered or that could not run. Try a different model, or "
            "rephrase; the run's messages are on this error's .messages.",
            iterations=self.budget.used,
            messages=self.new_messages,
            metrics=self.metrics,
        )

    async def call_model(self) -> AsyncIterator[RunEvent]:
        """One model call: the window fitted first (:meth:`fit_window`), then its deltas streamed, then a
        :class:`ModelCallFinished`; keeps the response.

        A call held to the output type's schema also yields the value so far (:class:`PartialOutput`).
        """
        self.check_calls()
        await self.fit_window()
        iteration = self.budget.used
        typed = self.output if self.output is not None and self.settings.json_schema is not None else None
        yield ModelCallStarted(iteration, for_output=typed is not None)
        messages = [m for m in self.transcript if id(m) not in self.aside] if self.aside else list(self.transcript)
        request = ModelRequest(
            messages, self.offered_tools(), self.settings, self.config.tool_judge, streamed=self.request.streamed
        )
        started = time.perf_counter()
        response: ModelResponse | None = None
        recorder = self.request.recorder
        stream = self.client.stream(request) if recorder is None else recorder.model_call(self.client, request)
        if self.tracer is not None:
            stream = self.tracer.model_call(stream, for_output=typed is not None)
        written: list[str] = []
        shown: tuple[Any, ...] = ()  # the last partial value yielded, in a tuple: None is a value
        async with closing(stream) as opened:
            async for event in opened:
                if isinstance(event, ModelResponse):
                    response = event
                    continue
                yield event
                if typed is not None and isinstance(event, TextDelta) and event.text:
                    written.append(event.text)
                    ok, value = typed.partial("".join(written))
                    if ok and (not shown or shown[0] != value):
                        shown = (value,)
                        yield PartialOutput(value)
        duration = time.perf_counter() - started
        if response is None:
            raise ModelError("The engine's stream ended without an answer; retry the turn (nothing was lost).")
        if self.tracer is not None:
            self.tracer.model_call_finished(response)
        self.metrics.model_calls += 1
        self.metrics.output_calls += self.answered
        self.metrics.model_time += duration
        self.metrics.add_usage(response.usage)
        self.response = response
        yield ModelCallFinished(response, duration, iteration)

    def screen(self, reply: Message) -> Screened:
        """What to do with ``reply``'s tool calls.

        Small models "call" a tool for questions no tool fits, with arguments
        that come from nowhere in the conversation: such text-written calls are
        dropped, and with none left the model is asked for a plain answer. They
        also call the same tool again instead of reading its result: re-running
        it would repeat side effects and loop, so the question is restated
        once, and then tools are withheld.
        """
        if not reply.tool_calls:
            if reply.content.strip() and not self._only_calls_as_text(reply) and not self._replays_narration(reply):
                return Screened(Verdict.RETRY if self._gave_up_after_failure() else Verdict.ANSWER, reply)
            if not self.asked_again:
                return Screened(Verdict.ASK_AGAIN, reply)
            note = self._empty_answer_note()
            return Screened(Verdict.ANSWER, reply.model_copy(update={"content": note}), shown=note)
        if self.withhold_tools:
            # Asked for an answer with no tools offered, the model called tools anyway (an engine that ignores an
            # empty tool list, or a model that writes calls by habit): they cannot run, so this is no answer.
            # Once more, then the note; never a loop that spends no iteration.
            bare = reply.model_copy(update={"tool_calls": []})
            if not self.asked_again:
                return Screened(Verdict.ASK_AGAIN, bare)
            note = self._empty_answer_note()
            return Screened(Verdict.ANSWER, bare.model_copy(update={"content": note}), shown=note)
        if all(self.toolbox.resolve(call.name) is None for call in reply.tool_calls):
            # The model asked for a tool it was not given (``calculate_area_of_triangle`` beside a BMI tool): the
            # clearest sign that no offered tool fits. Nothing is started; it answers without tools.
            return Screened(Verdict.NO_SUCH_TOOL, reply)
        if self.config.check_grounding and any(call.from_text or call.extra for call in reply.tool_calls):
            # only calls a small model wrote as text are checked; structured calls need no evidence gathered
            evidence = conversation_evidence([*self.transcript, reply])
            kept = self._grounded(reply.tool_calls, evidence)
            if not kept:
                return Screened(Verdict.WITHHOLD_TOOLS, reply)
            reply = reply.model_copy(update={"tool_calls": kept})
        if self.config.nudge_repeated_calls and self.calls.guard.all_repeated(reply.tool_calls):
            return Screened(Verdict.WITHHOLD_TOOLS if self.nudged else Verdict.NUDGE, reply)
        return Screened(Verdict.RUN_TOOLS, reply)

    async def no_such_tool(self, reply: Message) -> None:
        """Every call of ``reply`` names a tool that was not offered: none runs; the model is told which tools exist
        and asked for an answer without tools (its reply's text kept, its calls left out)."""
        names = list(dict.fromkeys(call.name for call in reply.tool_calls))
        self.metrics.unknown_tool_calls += len(reply.tool_calls)
        self.withhold_tools = True
        tools = ", ".join(self.toolbox.names()) or "none"
        note = prompt_text("no_such_tool").format(
            names=" or ".join(f"'{as_data(name[:64])}'" for name in names), tools=tools, prompt=self.request.prompt
        )
        bare = reply.model_copy(update={"tool_calls": []})
        told = Message(role="user", name=LOOP_NAME, content=note)
        kept = [bare, told] if bare.content.strip() else [told]
        self._append(*kept)
        await self._persist(*kept)

    async def nudge(self) -> None:
        """Restate the question, asking for an answer from the results already there."""
        self.nudged = True
        nudge = Message(
            role="user", name=LOOP_NAME, content=prompt_text("repeat_nudge").format(prompt=self.request.prompt)
        )
        self._append(nudge)
        await self._persist(nudge)

    async def ask_again(self, reply: Message) -> None:
        """The reply was empty: keep it, and ask once more for an answer."""
        self.asked_again = True
        again = Message(
            role="user", name=LOOP_NAME, content=prompt_text("empty_answer").format(prompt=self.request.prompt)
        )
        self._append(reply, again)
        await self._persist(reply, again)

    async def retry(self, reply: Message) -> None:
        """The model stopped at a failed call: keep its reply, and ask it once to correct the call and go on."""
        self.retried = True
        failed = self.calls.failed[0]
        reason = failed.content.strip().splitlines()[0][:300] if failed.content.strip() else "it failed"
        again = Message(
            role="user",
            name=LOOP_NAME,
            content=prompt_text("retry_failed_call").format(prompt=self.request.prompt, tool=failed.name, error=reason),
        )
        self._append(reply, again)
        await self._persist(reply, again)

    async def answer(self, reply: Message) -> None:
        """Keep the final reply."""
        self._append(reply)
        await self._persist(reply)

    def typed_answer(self, reply: Message) -> bool:
        """Whether the answer ``reply`` is a valid value of the output type (kept for the result).

        If not, the next model call asks for it, held to the schema and without tools: as JSON, after an answer
        in prose; again, with what was wrong, after a value that did not validate (``output_retries`` times).

        Raises:
            OutputValidationError: the value did not validate, and the retries are spent.
        """
        assert self.output is not None
        value, problem = self.output.parse(reply.content)
        if problem is None:
            self.output_value = value
            return True
        held = self.settings.json_schema is not None  # else this was prose: ask for the JSON, no mistake made
        if held:
            if self.output_retries >= self.config.output_retries:
                self.metrics.elapsed = time.perf_counter() - self.started
                raise OutputValidationError(
                    f"The answer did not validate as {self.output.name} after {self.output_retries + 1} attempts: "
                    f"{problem}",
                    attempt=reply.content,
                    problem=problem,
                )
            self.output_retries += 1
        self.answered = True
        self.settings = self.output.settings(self.settings)
        self.withhold_tools = True
        ask = self.output.ask(reply.content if held else None, problem)
        self._append(Message(role="user", name=LOOP_NAME, content=ask))
        return False

    async def spend_iteration(self, reply: Message) -> None:
        """Count a round of tool calls; past the budget, ``on_max_iterations`` may grant more, else the run stops.

        Raises:
            MaxToolIterationsError: with every message of the run; the calls that will not run
                are answered first, so the stored history stays valid.
        """
        self._append(reply)
        if self.budget.used >= self.budget.limit:
            grant = self.config.on_max_iterations
            if grant is None or not await grant(self.budget.used):
                raise await self._stop_at_max_iterations(reply)
            self.budget.limit += self.config.max_tool_iterations
        self.budget.used += 1

    async def run_tools(self, reply: Message) -> AsyncIterator[RunEvent]:
        """Run the reply's calls; their results join the transcript in request order.

        When some wait for a person (``defer_approvals``), the others' results are held and the run pauses:
        nothing of the round joins the transcript or memory until it is whole (:meth:`resume_tools`).
        """
        started = time.perf_counter()
        results: list[Message] = []
        async with closing(self.calls.run(reply.tool_calls, results)) as opened:
            async for event in opened:
                yield event
        self.metrics.tool_time += time.perf_counter() - started
        if self.paused:
            self.held = results
            return
        await self._end_round(reply, results)

    async def resume_tools(self) -> AsyncIterator[RunEvent]:
        """Finish the round the run paused in, as the answers say (the waiting calls run or are refused; the others
        keep their results); the whole round then joins the transcript and memory as any round does."""
        reply = self.transcript[-1]
        started = time.perf_counter()
        results: list[Message] = []
        async with closing(self.calls.resume(reply.tool_calls, self.held, self.request.approvals, results)) as opened:
            async for event in opened:
                yield event
        self.metrics.tool_time += time.perf_counter() - started
        self.held = []
        await self._end_round(reply, results)

    async def _end_round(self, reply: Message, results: list[Message]) -> None:
        """A whole round's results join the transcript (and memory, with the reply that asked for them)."""
        self._append(*results)
        tools = [self.toolbox.resolve(call.name) for call in reply.tool_calls]
        if all(tool is not None and tool.answer_after for tool in tools) and not any(r.is_error for r in results):
            # A note to itself is done: now the answer, to the user's message as it was before the note, and the
            # note stays out of the history. Shown its call and result, small models call it again or write
            # the result out as their answer, in this turn and the next (measured: Qwen2.5-Coder 0.5B and 1.5B).
            self.withhold_tools = True
            self.aside.update(id(message) for message in (reply, *results))
            return
        await self._persist(reply, *results)

    def finish(self) -> RunResult:
        """The run's result; the extensions' ``after_turn`` starts in the background (once the turn is done, not
        when it paused)."""
        assert self.response is not None
        self.metrics.elapsed = time.perf_counter() - self.started
        state = self._paused_state() if self.paused else None
        result: RunResult[Any] = RunResult(
            output=self.new_messages[-1].content if self.output is None else self.output_value,
            new_messages=self.new_messages,
            metrics=self.metrics,
            thread=self.thread,
            stop_reason=self.response.finish_reason,
            changed_by=self.calls.changed_by,
            prompt=self.request.prompt,
            status="done" if state is None else "paused",
            pending_approvals=[] if state is None else state.pending,
            state=state,
        )
        if self.tracer is not None:
            self.tracer.finish(result)
        if state is not None:
            return result
        for extension in self.extensions:
            if getattr(type(extension), "after_turn", None) is TurnExtension.after_turn:
                continue  # the do-nothing default (memory's part): no task to start
            self.background.start(extension.after_turn(result), name=f"{extension.name}.after_turn", scope=self.scope)
        return result

    def _paused_state(self) -> RunState:
        """The paused run as a :class:`RunState` (its docstring says what each part is)."""
        kept = len(self.transcript) - self.turn_start  # the turn's messages still in the transcript
        return RunState(
            agent=self.config.name,
            tools=fingerprint(self.toolbox.active),
            thread=self.thread,
            prompt=self.request.prompt,
            messages=list(self.transcript),
            turn_start=self.turn_start,
            summarized=self.new_messages[: len(self.new_messages) - kept],
            results=list(self.held),
            pending=self.calls.waiting,
            iterations=self.budget.used,
            iteration_limit=self.budget.limit,
            metrics=self.metrics.model_copy(),
            changed_by=list(self.calls.changed_by),
            loaded_groups=self.toolbox.loaded,
            settings=asdict(self.settings),
            remember=self.request.remember,
            once=[name for name in _ONCE if getattr(self, name)],
        )

    # -- helpers --------------------------------------------------------------------------

    def _gave_up_after_failure(self) -> bool:
        """Whether this prose reply comes right after a round whose calls all failed, and one more try is allowed.

        Small models stop at the first error: shown an edit that missed, with the file's text to
        copy, the 1.5B model told the user how to make the edit instead of making it. A call the
        user refused is not the model's mistake and is not retried.
        """
        return (
            self.config.retry_failed_calls
            and not self.retried
            and not self.withhold_tools
            and bool(self.calls.failed)
            and self.transcript[-1].role == "tool"
            and self.budget.used < self.budget.limit
        )

    def _replays_narration(self, reply: Message) -> bool:
        """Whether this prose is the text of one of this turn's earlier replies that made calls, word for word.

        Given its tool's results, the 1.5B model sometimes writes again what it wrote with the call ("To answer
        this, I'll use the `grep_files` function... Here's the JSON response:") and stops: that announces a call
        it no longer makes and answers nothing, so it is treated as no answer (asked once more, then the note).
        """
        said = " ".join(reply.content.split())
        return any(
            message.role == "assistant" and message.tool_calls and " ".join(message.content.split()) == said
            for message in self.new_messages
        )

    def _only_calls_as_text(self, reply: Message) -> bool:
        """Asked for an answer without tools, the model wrote nothing but tool calls: that is no answer either."""
        if not self.withhold_tools:
            return False
        remaining, calls = recover_tool_calls(reply.content, self.toolbox.specs())
        return bool(calls) and not remaining.strip()

    def _empty_answer_note(self) -> str:
        """What the user reads when the model answered nothing twice: that, and what the tools did."""
        ran = [m for m in self.new_messages if m.role == "tool"]
        if not ran:
            return "(The model gave no answer. Try rephrasing the question.)"
        failed = sum(m.is_error for m in ran)
        counts: dict[str, int] = {}
        for message in ran:
            counts[message.name or "tool"] = counts.get(message.name or "tool", 0) + 1
        calls = ", ".join(f"{name} ×{count}" if count > 1 else name for name, count in counts.items())
        errors = f", {failed} failed" if failed else ""
        return f"(The model gave no answer. This turn ran {len(ran)} tool call(s): {calls}{errors}.)"

    def _grounded(self, calls: list[ToolCall], evidence: Evidence) -> list[ToolCall]:
        """The calls that pass the grounding check, in order (the module ``grounding``)."""
        kept: list[ToolCall] = []
        earlier: list[tuple[ToolCall, Tool]] = []
        for call in calls:
            tool = self.toolbox.resolve(call.name)
            if tool is None:
                kept.append(call)  # unknown names get their own error
                continue
            # A call added after the one the model set out to make carries invented values more often
            # than copied ones (a made-up amount next to a city from the question), or hands the same
            # inputs to another tool: all its values must check out, and a new tool needs one of its own.
            if call.extra and not is_grounded_addition(call, tool, evidence, earlier):
                continue
            if call.from_text and not call.extra and not is_grounded(call, tool, evidence):
                continue  # structured calls come from models that call tools natively: not checked
            kept.append(call)
            earlier.append((call, tool))
        return kept

    async def _stop_at_max_iterations(self, reply: Message) -> MaxToolIterationsError:
        unrun = [
            Message.tool(call, "Not run: the run stopped at max_tool_iterations.", is_error=True)
            for call in reply.tool_calls
        ]
        self._append(*unrun)
        await self._persist(reply, *unrun)
        self.metrics.elapsed = time.perf_counter() - self.started
        return MaxToolIterationsError(
            f"The model was still calling tools after {self.budget.used} tool iterations "
            f"(max_tool_iterations={self.config.max_tool_iterations}). Raise max_tool_iterations, or pass "
            "on_max_iterations= to grant more; the run's messages are on this error's .messages.",
            iterations=self.budget.used,
            messages=self.new_messages,
            metrics=self.metrics,
        )

    def _append(self, *messages: Message) -> None:
        self.transcript.extend(messages)
        if not self.answered:
            self.new_messages.extend(messages)

    async def _persist(self, *messages: Message) -> None:
        if self.memory is not None and messages and self.request.remember and not self.answered:
            await self.memory.append_messages(self.thread, messages)


_ONCE = ("nudged", "asked_again", "retried")
"""The loop's once-only steps a paused run keeps (``RunState.once``), in the order ``Run.resume`` reads them."""


async def _open(deps: RunDeps, request: TurnRequest) -> tuple[MemoryProvider | None, list[TurnExtension], TurnScope]:
    """A turn's memory, its extensions (memory's part first) and the scope they are called in."""
    memory = await resolve_memory(deps.memory, request.thread)
    if memory is not None and request.recorder is not None:
        memory = request.recorder.memory(memory)
    extensions = list(deps.extensions if request.extensions is None else request.extensions)
    if memory is not None:
        extensions = [MemoryTurn(memory), *extensions]
    return memory, extensions, TurnScope(request.thread, deps.client, deps.handle, deps.busy)


async def _checked_parts(
    config: RunConfig, deps: RunDeps, request: TurnRequest, state: RunState
) -> tuple[MemoryProvider | None, list[TurnExtension], TurnScope, Toolbox]:
    """What a paused run goes on with, once the answers, this agent, its tools and the thread pass the checks of
    ``agent/approvals.py``: memory, the extensions, their scope, and the toolbox as it was (its groups loaded)."""
    check_answers(state, request.approvals)
    check_agent(state, config.name)
    memory, extensions, scope = await _open(deps, request)
    tools, groups = as_tools(extension_tools(extensions, request.thread))
    toolbox = Toolbox([*deps.tools, *tools], [*deps.tool_groups, *groups])
    await toolbox.load_eager()
    await toolbox.reload(state.loaded_groups)
    check_tools(state, toolbox.active)
    if memory is not None and state.remember:
        await check_thread(memory, state)
    return memory, extensions, scope, toolbox


@dataclass(frozen=True)
class _ToolOffer:
    """Whether a turn's first call offers tools, and the settings it runs with.

    Attributes:
        withhold: the first call offers no tools (none wanted, a typed answer at once, or no tool is for it).
        general: the tool judge found no tool is for the question (nor a lookup of its words in the workspace).
        settings: the turn's settings (held to the output schema when the typed answer comes at once).
        spec: the typed answer's, with an ``output_type``.
    """

    withhold: bool
    general: bool
    settings: ModelSettings
    spec: OutputSpec | None

    @classmethod
    async def decide(
        cls,
        config: RunConfig,
        deps: RunDeps,
        request: TurnRequest,
        specs: list[ToolSpec],
        past: list[Message],
        settings: ModelSettings,
    ) -> _ToolOffer:
        spec = output_spec(config.output_type) if config.output_type is not None else None
        typed_at_once = spec is not None and (not request.use_tools or not (deps.tools or deps.tool_groups))
        withhold = not request.use_tools or typed_at_once
        general = False
        if not withhold and config.tool_judge is not None:
            general = withhold = await _no_tool_is_for(config.tool_judge, request.prompt, specs, past, settings)
        if spec is not None and typed_at_once:
            # An agent with no tools of its own has no work to do first: its first answer is the typed one, held
            # to the schema (which leaves no room for a call of memory's or an extension's tools either).
            settings = spec.settings(settings)
        return cls(withhold, general, settings, spec)


def _user_message(request: TurnRequest, context: Sequence[tuple[TurnExtension, str]], general: bool) -> Message:
    """The user's message with the turn's context blocks: a question no tool is for (``general``) gets no lookup of
    its words in the workspace either (lines that happen to share a word with "Who wrote Pride and Prejudice?" only
    pull the answer towards the files). What is not Unicode (a lone surrogate) is replaced: it is stored and sent
    whole."""
    blocks = [block for extension, block in context if not (general and looks_up_workspace(extension))]
    text = valid_text(_with_context(request.prompt, [*blocks, *filter(None, [request.context])]))
    return Message.user(text, images=request.images)


async def _fitted(request: TurnRequest, client: ModelClient, window: int | None) -> tuple[TurnRequest, str | None]:
    """``request`` with its message cut to what ``window`` takes (:func:`fit_prompt`), and how it was cut."""
    prompt, cut = await fit_prompt(request.prompt, client, window)
    return (request if cut is None else replace(request, prompt=prompt)), cut


def _refuse_images(client: ModelClient, images: Sequence[Image]) -> None:
    """Raise the engine's error for images its model cannot be shown, before the message is stored: stored, it would
    go with every later turn of the thread, and fail each."""
    refused = client.images_refused(images)
    if refused is not None:
        raise refused


def _shown_to(client: ModelClient, history: list[Message]) -> list[Message]:
    """The earlier messages as ``client``'s model can be shown them: an earlier turn's images it cannot be shown (a
    model without vision, switched to mid-thread; a URL to a local engine) become a line each naming them, so the
    thread goes on instead of failing at every turn. Memory keeps them as they were."""
    shown = []
    for message in history:
        refused = client.images_refused(message.images) if message.images else None
        shown.append(message if refused is None else message.without_images("this model cannot be shown images"))
    return shown


async def _no_tool_is_for(
    judge: CallJudge, question: str, tools: list[ToolSpec], past: Sequence[Message], settings: ModelSettings
) -> bool:
    """Whether the judge says none of ``tools`` is for ``question``: the turn is then answered with no tools offered.

    On an engine that guides calls, a call of a tool the judge does not allow would be turned into prose
    anyway; on every engine, leaving the tools' descriptions (most of a small prompt) out means the model
    cannot reach for one, and "What is a mutex?" costs its own words, not the tool set's. Asked only when the
    choice is the model's (``tool_choice`` unset or ``"auto"``) and only in a conversation that has not called
    a tool yet: one that has keeps its tools, so its prompt keeps the beginning the engine has cached and a
    tool's result is never read again under another. A judge that fails is no opinion: the tools are offered.
    """
    if not tools or settings.tool_choice not in (None, "auto") or any(m.tool_calls for m in past):
        return False
    try:
        fit = await judge.assess(question, tools)
    except Exception as error:  # a second opinion that failed is no opinion
        log.warning("the tool judge failed (%s); the tools are offered", error)
        return False
    if fit.allowed:
        return False
    log.info("no offered tool is for this question; answered without tools (%s)", fit.detail)
    return True


async def _gather_turn(
    memory: MemoryProvider | None, extensions: Sequence[TurnExtension], request: TurnRequest, scope: TurnScope
) -> Turn:
    """The caller's history then memory's, as the engine's model can be shown them (:func:`_shown_to`); context blocks
    and tools from the extensions (memory's part first), gathered at once."""
    thread = request.thread
    loading = memory.load_history(thread) if memory is not None else None
    if loading is not None and extensions:
        history, blocks = await asyncio.gather(loading, gather_context_of(extensions, thread, request.prompt, scope))
    else:
        history = await loading if loading is not None else []
        blocks = await gather_context_of(extensions, thread, request.prompt, scope)
    history = _shown_to(scope.engine, [*request.history, *history])
    return Turn(history=history, context=blocks, tools=extension_tools(extensions, thread))


def _with_context(prompt: str, blocks: list[str]) -> str:
    """The user message: the ``<context>`` block (when there is one), then what the user typed.

    This is the one place a turn's context is assembled, so it is the one place it is escaped: every block
    (memory, recall, the extensions', the caller's) is data that must not close or forge the block.
    """
    if not blocks:
        return prompt
    return prompt_text("turn_context").format(context="\n\n".join(as_data(block) for block in blocks), prompt=prompt)


def _recent_start(transcript: list[Message], tools: list[ToolSpec], *, budget: int, floor: int) -> int:
    """The first index to keep: the current turn (``floor``) if it fits ``budget``, else its newest messages that do."""
    if estimate_tokens(transcript[floor:], tools) <= budget:
        return floor
    index = len(transcript) - 1  # the newest message is always kept
    while index - 1 > floor and estimate_tokens(transcript[index - 1 :], tools) <= budget:
        index -= 1
    return index

"""OpenTelemetry traces of agent runs: a span per run, per model call and per tool call.

Off unless switched on, and then free of cost when off: :func:`instrument` turns it on for every agent
(through the globally configured tracer provider), ``Agent(instrument=True)`` for one agent
(``instrument=False`` keeps one agent out). Spans follow the OpenTelemetry GenAI semantic conventions:

- ``invoke_agent {agent}``: ``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.conversation.id``
  (the thread), ``gen_ai.provider.name`` (the engine), ``gen_ai.request.model``, token usage;
- ``chat {model}`` under it for each model call: the request's temperature, max tokens and seed,
  ``gen_ai.usage.input_tokens`` / ``output_tokens`` / ``cache_read.input_tokens``, finish reasons;
- ``execute_tool {tool}`` for each tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, and
  ``error.type`` with an error status when the call failed or was refused.

The call that asks for a typed answer (``output_type``) is a ``chat`` span of the same run, marked
``gen_ai.output.type: json``. Each span is the current one while its step runs, so a subagent run from a tool,
or an instrumented HTTP client called by one, lands in the same trace under ``execute_tool``.

What was said (the prompt, the answer, tool arguments and results) stays out of spans unless
``include_content=True``. Needs ``opentelemetry-api`` (``pip install 'cortana[otel]'``); without an SDK and
a provider configured, spans go nowhere, as OpenTelemetry's API does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cortana.errors import UserError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from cortana.messages import Message, RunResult, ThreadRef, ToolCall
    from cortana.models.base import ModelClient, ModelResponse, ModelSettings

__all__ = ["Instrumentation", "RunTracer", "instrument", "instrumentation_for", "otlp_instrumentation", "uninstrument"]

T = TypeVar("T")

TRACER_NAME = "cortana"
CONTENT_CHARS = 8_000
"""The most characters of one piece of content put on a span (when content is on)."""


@dataclass(frozen=True)
class Instrumentation:
    """How runs are traced.

    Attributes:
        include_content: put the prompt, the answer, and tool arguments and results on spans (off: only
            names, ids, counts and timings).
        tracer_provider: the provider to take the tracer from (default: OpenTelemetry's global one).
    """

    include_content: bool = False
    tracer_provider: TracerProvider | None = None

    def tracer(self) -> Tracer:
        try:
            from opentelemetry import trace
        except ImportError:
            raise UserError("tracing needs OpenTelemetry's API: pip install 'cortana[otel]'") from None
        from cortana import __version__

        return trace.get_tracer(TRACER_NAME, __version__, tracer_provider=self.tracer_provider)


_everywhere: Instrumentation | None = None


def instrument(*, include_content: bool = False, tracer_provider: TracerProvider | None = None) -> Instrumentation:
    """Trace the runs of every agent (except those made with ``instrument=False``) from now on."""
    global _everywhere
    settings = Instrumentation(include_content, tracer_provider)
    settings.tracer()  # a missing package is said now, not at the first run
    _everywhere = settings
    return settings


def uninstrument() -> None:
    """Stop tracing the agents :func:`instrument` switched on."""
    global _everywhere
    _everywhere = None


def instrumentation_for(agent_setting: bool | Instrumentation | None) -> Instrumentation | None:
    """What a run is traced with: the agent's own setting, else :func:`instrument`'s; None: not traced."""
    if agent_setting is None:
        return _everywhere
    if agent_setting is True:
        return _everywhere or Instrumentation()
    return agent_setting or None


def otlp_instrumentation(
    endpoint: str, *, include_content: bool = False
) -> tuple[Instrumentation, Callable[[], object]]:
    """Spans sent to an OTLP/HTTP collector at ``endpoint`` (``http://localhost:4318``), batched, with a tracer
    provider of their own (``service.name`` ``cortana``); and the function that flushes and closes it."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise UserError("exporting traces needs OpenTelemetry's SDK: pip install 'cortana[otel]'") from None
    provider = TracerProvider(resource=Resource.create({"service.name": "cortana"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    return Instrumentation(include_content, provider), provider.shutdown


class _Turn(Protocol):
    """What a tracer reads of a turn's request (``TurnRequest`` has it)."""

    @property
    def prompt(self) -> str: ...
    @property
    def thread(self) -> ThreadRef: ...
    @property
    def settings(self) -> ModelSettings: ...


def _clip(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"


def _as_text(value: object) -> str:
    """An answer as a span shows it: text as it is; a typed value (a model, a dataclass, a list...) as JSON."""
    if isinstance(value, str):
        return value
    from pydantic_core import to_json

    return to_json(value, fallback=repr).decode()


class RunTracer:
    """The spans of one run. The run opens them as its steps begin (``agent/run.py``, ``agent/tool_calls.py``).

    Each span is the *current* one while its step's own code runs: the run's span while the run works,
    ``chat`` while the engine streams, ``execute_tool`` while a tool runs. So whatever those steps call
    and trace (a subagent's run, an instrumented HTTP client) joins the same trace, under the right span.
    """

    def __init__(self, settings: Instrumentation, agent: str, client: ModelClient, request: _Turn) -> None:
        from opentelemetry import context, trace

        self._trace = trace
        self._context = context
        self.content = settings.include_content
        self.tracer = settings.tracer()
        self.model = client.model
        self.provider = client.engine
        self.settings = request.settings
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": request.thread.thread_id,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }
        if self.content:
            attributes["gen_ai.input.messages"] = json.dumps([{"role": "user", "content": _clip(request.prompt)}])
        # Under whatever span is current where the run starts: a tool's, when a tool runs this agent.
        self.run = self.tracer.start_span(f"invoke_agent {agent}", kind=trace.SpanKind.INTERNAL, attributes=attributes)
        self._inside = trace.set_span_in_context(self.run)
        self._call: Span | None = None
        self._tools: dict[str, Span] = {}
        self.done = False

    def within(self, events: AsyncIterator[T]) -> AsyncIterator[T]:
        """``events``, with the run's span current while the run makes each one, and only then.

        Attached and detached around each step, not across a ``yield``: the caller's code between events
        runs in its own context, and the tokens are always detached in the context that attached them.
        """
        return _stepped(self._context, self._inside, events)

    def model_call(self, events: AsyncIterator[T], *, for_output: bool) -> AsyncIterator[T]:
        """Open the ``chat`` span of a model call, current while ``events`` (the engine's stream) runs."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }
        for name, value in (
            ("temperature", self.settings.temperature),
            ("max_tokens", self.settings.max_tokens),
            ("seed", self.settings.seed),
        ):
            if value is not None:
                attributes[f"gen_ai.request.{name}"] = value
        if for_output:
            attributes["gen_ai.output.type"] = "json"
        self._call = self.tracer.start_span(
            f"chat {self.model}", context=self._inside, kind=self._trace.SpanKind.CLIENT, attributes=attributes
        )
        return _stepped(self._context, self._trace.set_span_in_context(self._call), events)

    def model_call_finished(self, response: ModelResponse) -> None:
        """Close the ``chat`` span with the response's model, token usage and finish reason."""
        if self._call is None:
            return
        usage = response.usage
        self._call.set_attributes(
            {
                "gen_ai.response.model": response.model or self.model,
                "gen_ai.usage.input_tokens": usage.prompt_tokens,
                "gen_ai.usage.output_tokens": usage.completion_tokens,
                "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
                "gen_ai.response.finish_reasons": (response.finish_reason,),
            }
        )
        self._call.end()
        self._call = None

    @contextlib.contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[Callable[[Message], None]]:
        """The ``execute_tool`` span of ``call``, current inside the block; call what it yields with the result.

        A block left by an exception leaves the span open for :meth:`fail` (the run fails with it).
        """
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = _clip(json.dumps(call.arguments, default=str))
        span = self.tracer.start_span(f"execute_tool {call.name}", context=self._inside, attributes=attributes)
        self._tools[call.id] = span
        results: list[Message] = []
        with self._trace.use_span(span, record_exception=False, set_status_on_exception=False):
            yield results.append
        self._tools.pop(call.id, None)
        if results:
            result = results[-1]
            if self.content:
                span.set_attribute("gen_ai.tool.call.result", _clip(result.content))
            if result.refusal is not None:
                span.set_attribute("cortana.tool.refusal", result.refusal)  # who said no: a rule, the user, a hook
            if result.is_error:
                span.set_attribute("error.type", "tool_error")
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, result.content[:200]))
        span.end()

    def finish(self, result: RunResult) -> None:
        """Close the run's span with the run's totals (and its answer, when content is on)."""
        metrics = result.metrics
        self.run.set_attributes(
            {
                "gen_ai.usage.input_tokens": metrics.prompt_tokens,
                "gen_ai.usage.output_tokens": metrics.completion_tokens,
                "gen_ai.usage.cache_read.input_tokens": metrics.cached_prompt_tokens,
                "cortana.model_calls": metrics.model_calls,
                "cortana.tool_calls": metrics.tool_calls,
                "cortana.output_calls": metrics.output_calls,
            }
        )
        if self.content:
            answer = [{"role": "assistant", "content": _clip(_as_text(result.output))}]
            self.run.set_attribute("gen_ai.output.messages", json.dumps(answer))
        self.run.end()
        self.done = True

    def fail(self, error: BaseException) -> None:
        """The run ended without finishing: every open span ends with the error (a cancel is not one)."""
        if self.done:
            return
        self.done = True
        cancelled = isinstance(error, GeneratorExit | asyncio.CancelledError)
        for span in (*self._tools.values(), *([self._call] if self._call else []), self.run):
            if not cancelled:
                span.set_attribute("error.type", type(error).__name__)
                span.record_exception(error)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)[:200]))
            span.end()
        self._tools.clear()
        self._call = None


async def _stepped(otel_context: Any, current: Context, events: AsyncIterator[T]) -> AsyncIterator[T]:
    """``events`` with ``current`` attached around each step (see :meth:`RunTracer.within`); closed with it."""
    iterator = aiter(events)
    try:
        while True:
            token = otel_context.attach(current)
            try:
                event = await anext(iterator)
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield event
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:
            await close()

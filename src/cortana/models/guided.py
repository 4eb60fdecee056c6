"""Guided tool calls on llama.cpp: calls written under a grammar, and checked before they run.

Small models write calls in whatever shape they like, with arguments that
miss the schema, and they call a close-looking tool for questions no tool
answers. On a llama.cpp server Cortana renders the prompt itself (the
server's own chat template, through ``/apply-template``) and answers through
``/completion`` in steps that share the cached prompt:

1. **A free start.** The model begins its answer as it would unguided, and
   prose streams to the user as it comes. :class:`CallOpening` watches the
   first characters: the moment the answer opens a call of an offered tool
   (in any shape: a fence, a bare object, a ``<tool_call>`` tag) and its name
   is complete, that stream is dropped.
2. **The call, under a grammar.** The prompt is prefilled with the start of a
   call of that tool in the template's own format, and a grammar built from
   the tools' schemas (:mod:`cortana.models.grammar`) makes the arguments
   match the schema. Further calls may follow, up to ``max_calls``, as a
   question that needs several does; they are marked
   :attr:`~cortana.messages.ToolCall.extra`, and the loop runs one only when
   the conversation holds every argument it can check.
3. **The check.** The conversation plus one question ("you are about to
   call X, which does this: <its description>, with these arguments: ...; is
   that exactly what I asked for?") answered ``yes`` or ``no`` under a
   grammar. A ``no`` (or, with ``verify_margin``, a margin of ``no`` over
   ``yes`` at or above it) turns the answer into prose, with the model told
   that no tool fits.

``tool_choice`` naming a tool writes its call at once; ``required`` first
picks a tool under a grammar of the offered names (:meth:`GuidedCalls.decide`).
The calls come back as structured calls, so the loop runs them as any
engine's. This needs a chat template that teaches the Hermes/Qwen
``<tool_call>`` JSON format (:func:`tool_call_format`: Qwen2.5, Qwen3,
Granite 4.0) and a model that is not thinking; other templates (Qwen3-Coder's
XML, gpt-oss's harmony, Gemma's), thinking models and engines without
grammars keep the chat API with text recovery (``cortana.models.toolparse``). Measured by
``bench/toolcall_eval.py`` (docs/engines.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from cortana.errors import ModelError
from cortana.messages import Message, StopReason, ToolCall, Usage
from cortana.models._http import HttpEngine, error_text
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ModelEvent, ModelRequest, ModelResponse, ToolFit, loose_name
from cortana.models.grammar import CALL_OPEN, call_grammar, call_prefix, choice_grammar
from cortana.models.openai_compat import to_openai_messages
from cortana.models.toolparse import make_tool_call, new_call_id
from cortana.prompts import prompt_text, strip_turn_context
from cortana.streams import closing

log = logging.getLogger(__name__)

__all__ = [
    "NO_TOOL",
    "CallOpening",
    "Decision",
    "GuidedCalls",
    "Verdict",
    "described",
    "named_tools",
    "parse_calls",
    "purpose_stems",
    "purpose_words",
    "template_supports_guiding",
    "tool_call_format",
]

NO_TOOL = "none"
"""The decision's answer when no offered tool should be called."""

DECISION_ROLE = "user"
_DECISION_TOKENS = 48
_DESCRIPTION_CHARS = 400
_VALUE_CHARS = 500  # longer than any argument in bench/toolcall_set's recorded calls (330)
_ARGUMENTS_CHARS = 2_000
"""The check shows a call's arguments bounded: a write_file's whole file would fill a small window twice."""
_FLOOR = -30.0  # the log-probability of a word the engine did not list among its top ones
# Prose after "none": anything that does not open like a call (a brace, a fence, a tag).
_PROSE_GRAMMAR = "root ::= [^{`<\\x00-\\x20] [^\\x00]*\n"
_BLOCK = re.compile(r"<tool_call>\n(.*?)(?:\n</tool_call>|\Z)", re.S)


def tool_call_format(chat_template: str) -> str:
    """The tool-call format a chat template teaches, read from the template's own text.

    ``"json"``: a JSON object in ``<tool_call>`` tags (Qwen2.5, Qwen3, Qwen3-2507, Granite 4.0, Hermes), the
    format the grammar writes; ``"xml"``: ``<tool_call><function=NAME><parameter=KEY>`` (Qwen3-Coder);
    ``"harmony"``: gpt-oss's channels (``<|channel|>commentary to=functions.NAME``); ``""``: none of these (a
    template without tools, Gemma's, Llama's). Only ``"json"`` is guided; the others take the chat API, where
    llama.cpp parses its format and the text recovery (:mod:`cortana.models.toolparse`) reads what it leaves.
    """
    if "<|channel|>" in chat_template:
        return "harmony"
    if "<tool_call>" not in chat_template or "tools" not in chat_template:
        return ""
    if "<function=" in chat_template or "<parameter=" in chat_template:
        return "xml"
    return "json"


def template_supports_guiding(chat_template: str) -> bool:
    """Whether a chat template teaches the ``<tool_call>`` JSON format the grammar writes (:func:`tool_call_format`);
    Qwen3-Coder's template has ``<tool_call>`` too, around XML the grammar does not write."""
    return tool_call_format(chat_template) == "json"


def described(request: ModelRequest, calls: list[ToolCall]) -> str:
    """The calls as the check shows them: each with what its tool does, then its arguments.

    Shown the tool's description, the model can see that a tool which looks close does something
    else than what was asked (development half of ``bench/toolcall_eval.py``: the check separated
    right calls from calls for no-fit questions with an AUC of 0.95, against 0.91 shown the calls
    alone).
    """
    descriptions = {tool.name: " ".join(tool.description.split())[:_DESCRIPTION_CHARS] for tool in request.tools}

    def one(call: ToolCall) -> str:
        arguments = json.dumps(_shortened(call.arguments), ensure_ascii=False)
        if len(arguments) > _ARGUMENTS_CHARS:
            arguments = arguments[:_ARGUMENTS_CHARS] + " ..."
        return (
            f"{call.name}, which does this: {descriptions.get(call.name, '(no description)')}\n"
            f"with these arguments: {arguments}"
        )

    if len(calls) == 1:
        return one(calls[0])
    return "these tools:\n" + "\n".join("- " + one(call).replace("\n", "\n  ") for call in calls)


_PURPOSE_WORD = re.compile(r"[a-z]{4,}")
_COMMON_WORDS = frozenset(
    {
        "what", "when", "where", "which", "with", "from", "that", "this", "have", "your", "into", "about", "give",
        "show", "find", "make", "there", "their", "them", "they", "will", "would", "could", "should", "please",
        "current", "given", "using", "value", "values", "number", "numbers",
    }
)  # fmt: skip


def purpose_words(question: str, tool: str, description: str) -> int:
    """How many words the question shares with what a tool is for (its name and description): stems of four
    letters or more (their first five), common words left out.

    Beside the check's margin, the best of five signals that tell a right call from one where no offered tool
    answers (``bench/nofit_signals.py``, development half, both bundled models): "area of a triangle" shares no
    word with ``bmi(weight, height)``'s "body mass index from weight and height", though the question's numbers
    fill its arguments.
    """
    return len(purpose_stems(question) & purpose_stems(f"{tool} {description}"))


def purpose_stems(text: str) -> set[str]:
    """The words :func:`purpose_words` compares: stems of four letters or more (their first five), names split at
    ``_`` and camel case, common words left out."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower().replace("_", " ")
    return {word[:5] for word in _PURPOSE_WORD.findall(spaced) if word not in _COMMON_WORDS}


def _shortened(value: Any) -> Any:
    """``value`` with long strings cut: a file's whole content need not be read again to judge a call."""
    if isinstance(value, str):
        return value if len(value) <= _VALUE_CHARS else value[:_VALUE_CHARS] + "..."
    if isinstance(value, dict):
        return {key: _shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Decision:
    """What the decision step chose, and what it cost.

    Attributes:
        choice: a tool's name, or :data:`NO_TOOL`.
        prompt_tokens: tokens the decision's prompt held.
        new_tokens: of those, the ones the engine had to read (not in its cache).
        logprobs: the top log-probabilities of the first word, as the engine reported them.
    """

    choice: str
    prompt_tokens: int = 0
    new_tokens: int = 0
    logprobs: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The check of calls before they run.

    Attributes:
        ok: run them.
        margin: log P(no) - log P(yes) for the first word (higher: surer the calls are wrong).
        logprobs: the top log-probabilities of the first word.
    """

    ok: bool
    margin: float
    logprobs: tuple[tuple[str, float], ...] = ()
    usage: Usage = field(default_factory=Usage)


class GuidedCalls:
    """The two-step answer on one llama.cpp server (see the module docstring).

    Args:
        http: the server connection.
        engine: the engine's name, for errors.
        max_calls: the most calls one answer may hold.
        verify_margin: reject calls when log P(no) - log P(yes) reaches this; ``None``: the greedy answer.
        purpose_step: how much ``verify_margin`` rises for each word the request shares with the called tool's
            name and description (:func:`purpose_words`).
        on_error: maps an error answer to our errors (context overflow, missing model).
    """

    def __init__(
        self,
        http: HttpEngine,
        *,
        engine: str,
        max_calls: int = 4,
        verify_margin: float | None = None,
        purpose_step: float = 0.0,
        on_error: Callable[[int, str], Exception | None] | None = None,
    ) -> None:
        self.http = http
        self.engine = engine
        self.max_calls = max(1, max_calls)
        self.verify_margin = verify_margin
        self.purpose_step = purpose_step
        self.on_error = on_error
        self.slot: int | None = None
        """The server slot every request goes to (the conversation's, whose prompt cache is saved and restored
        between processes); None: the server chooses."""

    def _body(self, **fields: Any) -> dict[str, Any]:
        """A ``/completion`` body: ``fields``, the cached prompt reused, in the conversation's slot if it has one."""
        body: dict[str, Any] = {**fields, "cache_prompt": True}
        if self.slot is not None:
            body["id_slot"] = self.slot
        return body

    async def render(self, request: ModelRequest, extra: list[dict[str, Any]] | None = None) -> str:
        """The prompt the server's chat template makes of ``request`` (plus ``extra`` messages)."""
        body: dict[str, Any] = {
            "messages": to_openai_messages(request.messages) + list(extra or []),
            "tools": [tool.as_function() for tool in request.tools],
        }
        if request.settings.think is False:
            body["chat_template_kwargs"] = {"enable_thinking": False}
        rendered = await self.http.request_json("POST", "/apply-template", json_body=body, on_error=self.on_error)
        prompt = rendered.get("prompt") if isinstance(rendered, dict) else None
        if not isinstance(prompt, str):
            raise ModelError(f"{self.engine} at {self.http.base_url} answered /apply-template without a prompt.")
        return prompt

    async def decide(self, request: ModelRequest) -> Decision:
        """Which offered tool to call next, or :data:`NO_TOOL`; honours ``tool_choice``."""
        names = [tool.name for tool in request.tools]
        choice = request.settings.tool_choice
        if choice in names:
            return Decision(choice)
        options = names if choice == "required" else [NO_TOOL, *names]
        if len(options) == 1:
            return Decision(options[0])
        question = {"role": DECISION_ROLE, "content": prompt_text("tool_decision")}
        choice, logprobs, timings = await self._ask(await self.render(request, [question]), options)
        return Decision(
            choice,
            prompt_tokens=int(timings.get("cache_n", 0)) + int(timings.get("prompt_n", 0)),
            new_tokens=int(timings.get("prompt_n", 0)),
            logprobs=logprobs,
        )

    async def verify(self, request: ModelRequest, calls: list[ToolCall]) -> Verdict:
        """Ask the model whether ``calls`` do what the user asked, before they run (``yes`` or ``no``)."""
        question = {"role": DECISION_ROLE, "content": prompt_text("tool_check").format(calls=described(request, calls))}
        # Models answer "Yes"/"No" more often than "yes"/"no": a grammar of the lower-case words
        # alone would pick between two unlikely tokens. Both spellings count, summed.
        answer, logprobs, timings = await self._ask(await self.render(request, [question]), ["yes", "no", "Yes", "No"])
        yes, no = _word_logprob(logprobs, "yes"), _word_logprob(logprobs, "no")
        margin = no - yes
        ok = answer.lower() == "yes" if self.verify_margin is None else margin < self.threshold(request, calls[0])
        log.log(
            logging.DEBUG if ok else logging.INFO,
            "the check %s %s (margin %.3f)",
            "let through" if ok else "turned away",
            ", ".join(call.name for call in calls),
            margin,
        )
        return Verdict(ok, margin, logprobs, _usage({"timings": timings}))

    def threshold(self, request: ModelRequest, call: ToolCall) -> float:
        """The margin a call is turned away at: ``verify_margin``, raised by ``purpose_step`` for each word the
        user's request shares with what the called tool is for (:func:`purpose_words`)."""
        assert self.verify_margin is not None
        if not self.purpose_step:
            return self.verify_margin
        asked = next((strip_turn_context(m.content) for m in reversed(request.messages) if m.role == "user"), "")
        spec = next((tool for tool in request.tools if tool.name == call.name), None)
        shared = purpose_words(asked, call.name, spec.description if spec else "")
        return self.verify_margin + self.purpose_step * shared

    async def _ask(self, prompt: str, options: list[str]) -> tuple[str, tuple[tuple[str, float], ...], dict[str, Any]]:
        """One word among ``options`` (greedy, under a grammar), its first token's top log-probabilities, timings."""
        data = await self.http.request_json(
            "POST",
            "/completion",
            json_body=self._body(
                prompt=prompt,
                grammar=choice_grammar(options),
                n_predict=_DECISION_TOKENS,
                temperature=0,
                n_probs=10,
            ),
            on_error=self.on_error,
        )
        content = str(data.get("content", "")).strip() if isinstance(data, dict) else ""
        if content not in options:
            raise ModelError(
                f"{self.engine} at {self.http.base_url} ignored the grammar (answered {content[:80]!r}); "
                "it may not support grammars. Turn guided tool calls off for this engine."
            )
        probabilities = data.get("completion_probabilities") or [{}]
        top = probabilities[0].get("top_logprobs") or []
        logprobs = tuple(
            (str(item.get("token", "")), float(item.get("logprob", _FLOOR))) for item in top if isinstance(item, dict)
        )
        return content, logprobs, data.get("timings") or {}

    async def stream(self, request: ModelRequest, model: str) -> AsyncIterator[ModelEvent]:
        """The guided answer: prose deltas, or checked calls in the final response.

        With ``tool_choice`` naming a tool or ``required``, the call is written at once. Otherwise the
        model starts freely, as it would unguided; the moment its answer opens a call of an offered
        tool, that stream is dropped, the call is written under the grammar and checked
        (:meth:`verify`). Calls the check rejects become a prose answer instead. With
        ``request.judge`` (:class:`~cortana.models.base.CallJudge`), a user's message is also scored by
        the judge while the engine reads the prompt: a call it vetoes becomes prose too, and a prose
        answer that names a tool the judge says fits gets that call, written under the grammar.
        """
        names = [tool.name for tool in request.tools]
        choice = request.settings.tool_choice
        if choice in names or choice == "required":
            decision = await self.decide(request)
            async with closing(self.answer(request, decision.choice, model)) as opened:
                async for event in opened:
                    yield event
            return
        judging = _Judging.start(request)
        try:
            async with closing(self._free(request, names, model, judging)) as opened:
                async for event in opened:
                    yield event
        finally:
            judging.cancel()

    async def _free(
        self, request: ModelRequest, names: list[str], model: str, judging: _Judging
    ) -> AsyncIterator[ModelEvent]:
        """The free start, then the call it opened (checked, and judged) or the prose (a described call made)."""
        prompt = await self.render(request)
        answer = AnswerBuilder(request.tools)
        outcome = _Outcome()
        opening = CallOpening(names)
        pieces = self._generate(request, prompt, None, outcome)
        async with aclosing(pieces):
            async for piece in pieces:
                if opening.feed(piece) is not None:
                    break  # the rest of this stream would be the call in the model's own shape
                for shown in answer.add_text(piece):
                    yield shown
        if opening.tool is None:
            *tail, prose = answer.final_events(outcome.usage, outcome.stop, model)
            for event in tail:
                yield event
            if not isinstance(prose, ModelResponse):
                raise ModelError(f"{self.engine} at {self.http.base_url}: the answer ended without a response")
            calls = prose.message.tool_calls  # written as text after some prose: the text recovery found them
            if not calls:
                yield await self._described_call(request, prompt, prose, model, judging) or prose
            elif await judging.allows(calls[0].name):
                yield prose
            elif prose.message.content.strip():  # the prose stands as the answer, without the calls
                yield dataclasses.replace(prose, message=prose.message.model_copy(update={"tool_calls": []}))
            else:
                async with closing(self._no_fit(request, model)) as opened:
                    async for event in opened:
                        yield event
            return
        free = outcome.usage  # with timings on every piece, known though the stream was dropped at the opening
        if not await judging.allows(opening.tool):  # turned away anyway: not written under the grammar, not checked
            async with closing(self._no_fit(request, model)) as opened:
                async for event in opened:
                    yield (
                        dataclasses.replace(event, usage=_together(free, event.usage))
                        if isinstance(event, ModelResponse)
                        else event
                    )
            return
        response = await self._written_calls(request, prompt, opening.tool, model)
        verdict = await self.verify(request, response.message.tool_calls) if response.message.tool_calls else None
        checked = [verdict.usage] if verdict is not None else []
        if verdict is None or verdict.ok:  # the judge allowed the tool the call opened with, the first call's
            yield dataclasses.replace(response, usage=_together(free, *checked, response.usage))
            return
        async with closing(self._no_fit(request, model)) as opened:
            async for event in opened:
                if isinstance(event, ModelResponse):  # the answer's usage: every request it took, not the last one's
                    event = dataclasses.replace(event, usage=_together(free, response.usage, *checked, event.usage))
                yield event

    async def _no_fit(self, request: ModelRequest, model: str) -> AsyncIterator[ModelEvent]:
        """A prose answer to the same conversation, told that no tool fits (it shares the cached prefix)."""
        no_fit = await self.render(request, [{"role": DECISION_ROLE, "content": prompt_text("tool_rejected")}])
        async with closing(self._prose(request, no_fit, model)) as opened:
            async for event in opened:
                yield event

    async def _described_call(
        self, request: ModelRequest, prompt: str, prose: ModelResponse, model: str, judging: _Judging
    ) -> ModelResponse | None:
        """The call a prose answer described instead of making ("I'll use list_files..."), when the judge agrees.

        The first offered tool the prose names that the judge says fits is written under the grammar
        from the original prompt, then checked as any call; the prose stays the message's text.
        """
        if prose.finish_reason != "stop":
            return None
        named = named_tools(prose.message.content, [tool.name for tool in request.tools])
        tool = await judging.described(named)
        if tool is None:
            return None
        written = await self._written_calls(request, prompt, tool, model)
        calls = written.message.tool_calls
        verdict = await self.verify(request, calls) if calls else None
        if verdict is None or not verdict.ok:
            return None
        log.info("made the %s call the answer described in prose", tool)
        message = prose.message.model_copy(update={"tool_calls": calls})
        usage = _together(prose.usage, verdict.usage, written.usage)
        return ModelResponse(message=message, usage=usage, finish_reason=written.finish_reason, model=model)

    async def answer(self, request: ModelRequest, choice: str, model: str) -> AsyncIterator[ModelEvent]:
        """The answer once decided: prose for :data:`NO_TOOL`, else calls starting with ``choice``."""
        prompt = await self.render(request)
        if choice == NO_TOOL:
            async with closing(self._prose(request, prompt, model)) as opened:
                async for event in opened:
                    yield event
            return
        async with closing(self._calls(request, prompt, choice, model)) as opened:
            async for event in opened:
                yield event

    async def _prose(self, request: ModelRequest, prompt: str, model: str) -> AsyncIterator[ModelEvent]:
        # No text recovery: the decision was "no call", so call-shaped text stays text.
        answer = AnswerBuilder(request.tools, recover_text_calls=False)
        outcome = _Outcome()
        async with closing(self._generate(request, prompt, _PROSE_GRAMMAR, outcome)) as opened:
            async for piece in opened:
                for shown in answer.add_text(piece):
                    yield shown
        for event in answer.final_events(outcome.usage, outcome.stop, model):
            yield event

    async def _calls(self, request: ModelRequest, prompt: str, first: str, model: str) -> AsyncIterator[ModelEvent]:
        yield await self._written_calls(request, prompt, first, model)

    async def _written_calls(self, request: ModelRequest, prompt: str, first: str, model: str) -> ModelResponse:
        """Calls starting with one of ``first``, written under the tools' grammar."""
        prefix = call_prefix(first)
        grammar = call_grammar(request.tools, first, max_calls=self.max_calls)
        outcome = _Outcome()
        generated = "".join([piece async for piece in self._generate(request, prompt + prefix, grammar, outcome)])
        message = Message(role="assistant", content="", tool_calls=parse_calls(prefix + generated))
        return ModelResponse(message=message, usage=outcome.usage, finish_reason=outcome.stop, model=model)

    async def _generate(
        self, request: ModelRequest, prompt: str, grammar: str | None, outcome: _Outcome
    ) -> AsyncGenerator[str, None]:
        """Stream ``/completion``'s text pieces; its usage and stop reason land in ``outcome``."""
        settings = request.settings
        body = self._body(prompt=prompt, stream=True, timings_per_token=True)  # usage known at any point
        if grammar is not None:
            body["grammar"] = grammar
        for key, value in (("temperature", settings.temperature), ("n_predict", settings.max_tokens)):
            if value is not None:
                body[key] = value
        if settings.seed is not None:
            body["seed"] = settings.seed
        finished = False
        lines = self.http.stream_lines("/completion", body, on_error=self.on_error)
        partial = AnswerBuilder([], recover_text_calls=False)
        async with aclosing(lines):
            async for line in lines:
                if finished or not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue
                try:
                    chunk = json.loads(data)
                except (ValueError, RecursionError):
                    raise ModelError(
                        f"{self.engine} at {self.http.base_url} sent an event that is not JSON: {data[:200]!r}"
                    ) from None
                if not isinstance(chunk, dict):
                    raise ModelError(f"{self.engine} at {self.http.base_url} sent {data[:200]!r}, not an object")
                if "error" in chunk:
                    raise ModelError(f"{self.engine} reported an error mid-answer: {error_text(data)}")
                piece = str(chunk.get("content") or "")
                if isinstance(chunk.get("timings"), dict):
                    outcome.usage = _usage(chunk)
                if chunk.get("stop"):
                    finished = True
                    outcome.usage = _usage(chunk)
                    outcome.stop = "length" if chunk.get("stop_type") == "limit" else "stop"
                if piece:
                    partial.add_text(piece)
                    yield piece
        if not finished:
            raise partial.interrupted(f"{self.engine} at {self.http.base_url}")


def _word_logprob(logprobs: tuple[tuple[str, float], ...], word: str) -> float:
    """The log-probability of ``word`` as the first token, all spellings (case, spaces) together."""
    found = [value for token, value in logprobs if token.strip().lower() == word]
    return math.log(sum(math.exp(value) for value in found)) if found else _FLOOR


class CallOpening:
    """Watches the start of a free answer for the opening of a call, as far as the tool's name.

    :meth:`feed` returns ``None`` while the answer may still be prose or a call, then the
    offered tool the call names (also kept in :attr:`tool`). An answer that starts as prose, or
    a call naming no offered tool, ends the watch with :attr:`tool` left ``None``: the text
    recovery and its unknown-tool error handle the rest, as on engines without grammars.
    """

    _OPENERS = ("<tool_call>", "```", "{", "[")
    _NAME = re.compile(r'"(?:name|tool|function)"\s*:\s*"([^"\n]{1,200})"|<function=([\w.\-]+)>')
    _LIMIT = 400  # characters of an opening without a name: not a call after all

    def __init__(self, names: list[str]) -> None:
        self._names = {loose_name(name): name for name in names}
        self._text = ""
        self.done = False
        self.tool: str | None = None

    def feed(self, piece: str) -> str | None:
        if self.done:
            return self.tool
        self._text += piece
        head = self._text.lstrip()
        if not head:
            return None
        if not any(head.startswith(o) or o.startswith(head) for o in (*self._OPENERS, "<function=")):
            self.done = True  # prose
            return None
        match = self._NAME.search(head)
        if match:
            self.done = True
            self.tool = self._names.get(loose_name(match.group(1) or match.group(2)))
            return self.tool
        if len(head) > self._LIMIT:
            self.done = True
        return None


@dataclass(slots=True)
class _Outcome:
    usage: Usage = field(default_factory=Usage)
    stop: StopReason = "stop"


def parse_calls(text: str) -> list[ToolCall]:
    """The calls in guided output (``<tool_call>`` blocks); a cut-off last block keeps its raw text."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for match in _BLOCK.finditer(text if text.startswith(CALL_OPEN) else CALL_OPEN + text):
        body = match.group(1).strip()
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            # Cut off by the token limit: kept whole, so the model is shown what it left unfinished.
            calls.append(ToolCall(id=new_call_id(), name=_cut_name(body), raw_arguments=body, extra=bool(calls)))
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            continue
        key = json.dumps(value, sort_keys=True)
        if key in seen:  # the same call twice does the same thing twice: once is enough
            continue
        seen.add(key)
        arguments = value.get("arguments")
        arguments = {} if arguments is None else arguments
        call = make_tool_call(new_call_id(), value["name"], arguments, None, from_text=False)
        calls.append(call.model_copy(update={"extra": True}) if calls else call)
    return calls


def _cut_name(body: str) -> str:
    match = re.search(r'"name":\s*"([^"]*)"', body)
    return match.group(1) if match else ""


def _together(*usages: Usage) -> Usage:
    """The usage of one answer that took several requests on one prompt (the free start, the call written under
    the grammar, its check, the prose instead): every token read and generated counted once per request that did
    it, the prompt as long as the last request's (or as what was read, if more). Summing the requests' prompts
    would count the shared prompt several times; taking the last request's alone missed what the others read
    (a call opened and turned away read the whole prompt, and showed as 39 tokens read)."""
    read = sum(max(usage.prompt_tokens - usage.cached_tokens, 0) for usage in usages)
    prompt = max(usages[-1].prompt_tokens, read)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=sum(usage.completion_tokens for usage in usages),
        cached_tokens=prompt - read,
    )


def _usage(chunk: dict[str, Any]) -> Usage:
    timings = chunk.get("timings") or {}
    cached = int(timings.get("cache_n") or 0)
    return Usage(
        prompt_tokens=cached + int(timings.get("prompt_n") or 0),
        completion_tokens=int(timings.get("predicted_n") or chunk.get("tokens_predicted") or 0),
        cached_tokens=cached,
    )


def named_tools(text: str, names: list[str]) -> list[str]:
    """The offered tools ``text`` names as identifiers ("`list_files`", "the grep_files function"), in order."""
    found = []
    for name in names:
        match = re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text)
        if match:
            found.append((match.start(), name))
    return [name for _, name in sorted(found)]


class _Judging:
    """The judge's opinion of a turn's first answer, formed while the engine reads the prompt.

    Only a user's own message is judged (a later round's calls follow from tool results the judge
    never sees); a judge that fails is logged and ignored: it is a second opinion, never a gate
    that can stop a turn.
    """

    def __init__(self, task: asyncio.Task[ToolFit] | None) -> None:
        self.task = task

    @classmethod
    def start(cls, request: ModelRequest) -> _Judging:
        judge = request.judge
        last = request.messages[-1] if request.messages else None
        if judge is None or last is None or last.role != "user" or not request.tools:
            return cls(None)
        return cls(asyncio.ensure_future(judge.assess(strip_turn_context(last.content), request.tools)))

    async def opinion(self) -> ToolFit | None:
        if self.task is None:
            return None
        try:
            if self.task.done():
                return self.task.result()
            started = time.perf_counter()  # the judge is usually done long before the engine's answer
            fit = await self.task
            log.debug("waited %.1f ms for the tool judge", 1000 * (time.perf_counter() - started))
            return fit
        except Exception as error:  # a second opinion that failed is no opinion
            log.warning("the tool judge failed (%s); its opinion is left out of this turn", error)
            self.task = None
            return None

    async def allows(self, tool: str) -> bool:
        """Whether the judge lets a call of ``tool`` run (no judge, or no opinion: yes)."""
        fit = await self.opinion()
        if fit is None or tool in fit.allowed:
            return True
        log.info("the tool judge turned away %s (%s)", tool, fit.detail)
        return False

    async def described(self, named: list[str]) -> str | None:
        """The first of the tools a prose answer named that the judge says fits, if any."""
        fit = await self.opinion() if named else None
        return next((name for name in named if name in fit.fitting), None) if fit else None

    def cancel(self) -> None:
        """Stop the judge if the answer no longer needs it; an error it raised unasked is only logged."""
        if self.task is None:
            return
        if not self.task.done():
            self.task.cancel()
        elif not self.task.cancelled() and (error := self.task.exception()) is not None:
            log.debug("the tool judge failed (%s); its opinion was not needed", error)

"""The OpenAI-compatible chat API, as llama.cpp's server and Docker Model Runner speak it.

Maps our ``ModelRequest`` to ``POST {base}/chat/completions`` (always
streamed, with ``stream_options.include_usage``) and the SSE answer back to
our events. Engine-specific parts (llama.cpp's ``/props``, Docker Model
Runner's model listing) live in ``llamacpp.py`` and ``docker.py``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, ClassVar
from urllib.parse import urlsplit

from cortana.errors import ContextOverflow, ModelError, ModelNotFound, UserError
from cortana.messages import Image, Message, StopReason, ToolCall, Usage, images_of
from cortana.models._http import HttpClient, HttpEngine, error_text
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ModelEvent, ModelRequest, ModelResponse, TextDelta, ToolSpec
from cortana.models.chunks import call_index, json_items, json_object, json_text, token_count
from cortana.streams import closing
from cortana.trust import is_loopback_url

__all__ = ["OpenAICompatClient", "image_part", "to_openai_messages", "user_content"]

WHOLE_ANSWER_TIMEOUT_S = 3600.0
"""How long an answer asked for whole may take: nothing arrives until it is done, so the client's timeout (for an
answer to start) would cut off a long answer a small CPU writes at a few tokens a second; a streamed answer has
no such limit, its tokens keep the connection alive."""


def _arguments_text(call: ToolCall) -> str:
    """A call's arguments as the JSON object text the chat format carries.

    Arguments the model wrote that are not a JSON object (cut off at the token limit, say) are
    sent wrapped as one: llama.cpp's server parses every call in the history and answers HTTP 500
    to one it cannot, which would end the turn instead of letting the model correct the call.
    """
    if call.raw_arguments is None or call.arguments:
        return json.dumps(call.arguments, ensure_ascii=False)
    try:
        parsed = json.loads(call.raw_arguments)
    except (ValueError, RecursionError):  # nested past Python's limit: sent as text, like broken JSON
        parsed = None
    if isinstance(parsed, dict):
        return call.raw_arguments
    return json.dumps({"unparsed_arguments": call.raw_arguments}, ensure_ascii=False)


def image_part(image: Image) -> dict[str, Any]:
    """One image as an OpenAI content part: a ``data:`` URL of its bytes, or the URL it was given by."""
    return {"type": "image_url", "image_url": {"url": image.data_url()}}


def user_content(message: Message) -> str | list[dict[str, Any]]:
    """A user message's ``content``: its text, or with images a list of parts, the text first, then each image
    (the OpenAI chat API's shape, which llama.cpp's server reads too)."""
    if not message.images:
        return message.content
    text = [{"type": "text", "text": message.content}] if message.content else []
    return [*text, *(image_part(image) for image in message.images)]


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in the OpenAI chat format (a user message with images: content parts)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.images:
            out.append({"role": message.role, "content": user_content(message)})
        elif message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": _arguments_text(call),
                            },
                        }
                        for call in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def refuse_plain_http_key(base_url: str) -> None:
    """Refuse to send an API key unencrypted to another machine.

    Raises:
        UserError: ``base_url`` is plain ``http://`` on a host that is not this machine; the message names it.
    """
    try:
        parts = urlsplit(base_url)
    except ValueError:
        return  # not a URL: the connection will say what is wrong with it
    if parts.scheme == "http" and not is_loopback_url(base_url):
        raise UserError(
            f"Not sending the API key to {parts.hostname} over plain http (anyone on the way could read it): "
            "use an https:// address, or set `send_key_over_http: true` in your own cortana.yml if that network "
            "is private."
        )


class OpenAICompatClient(HttpClient):
    """A ``ModelClient`` for any server that speaks the OpenAI chat-completions API.

    Args:
        model: the model name to send.
        base_url: the server's address; the OpenAI API sits at ``base_url + api_path``.
        context_window: the window to report when the server cannot tell.
        recover_text_tool_calls: recover tool calls the model wrote as text (see ``toolparse``).
        api_key: sent as a bearer token, for servers that want one; never over plain ``http://`` to another
            machine unless ``send_key_over_http`` (a :class:`~cortana.errors.UserError` names the host).
        send_key_over_http: allow sending ``api_key`` unencrypted to a host that is not this machine.
        timeout: seconds to wait for an answer to start.
        max_retries: extra attempts after 5xx answers and timeouts.
        transport: an httpx transport, for tests.
    """

    engine = "OpenAI-compatible server"
    supports_embeddings = True  # /embeddings (the served model must be an embedding model)
    can_list_models = True  # /models
    api_path: ClassVar[str] = ""
    """Where the OpenAI API sits under ``base_url`` (llama.cpp: ``/v1``)."""
    start_hint: ClassVar[str] = "Start the server, or point base_url at one that is running."

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        context_window: int | None = None,
        recover_text_tool_calls: bool = True,
        api_key: str | None = None,
        send_key_over_http: bool = False,
        timeout: float = 600.0,
        max_retries: int = 2,
        transport: Any = None,
    ) -> None:
        if api_key and not send_key_over_http:
            refuse_plain_http_key(base_url)
        self.model = model
        self._context_window = context_window
        self.recover_text_tool_calls = recover_text_tool_calls
        self.http = HttpEngine(
            base_url,
            engine=self.engine,
            start_hint=self.start_hint,
            timeout=timeout,
            max_retries=max_retries,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            transport=transport,
        )

    async def list_models(self) -> list[str]:
        """Names of the models the server offers (``GET /models``)."""
        data = await self.http.request_json("GET", f"{self.api_path}/models")
        return [item["id"] for item in data.get("data", [])]

    async def embed(self, texts: list[str], *, model: str | None = None) -> list[list[float]]:
        """Embeddings from ``POST /embeddings``, in input order (``model``: an embedding model, else the chat model)."""
        data = await self.http.request_json(
            "POST",
            f"{self.api_path}/embeddings",
            json_body={"model": model or self.model, "input": texts},
            on_error=self.error_for,
        )
        items = sorted(data["data"], key=lambda item: item.get("index", 0))
        return [list(map(float, item["embedding"])) for item in items]

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request``."""
        settings = request.settings
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [t.as_function() for t in request.tools]
            if settings.tool_choice in ("auto", "none", "required"):
                body["tool_choice"] = settings.tool_choice
            elif settings.tool_choice:
                body["tool_choice"] = {"type": "function", "function": {"name": settings.tool_choice}}
        for key, value in (
            ("temperature", settings.temperature),
            ("max_tokens", settings.max_tokens),
            ("seed", settings.seed),
        ):
            if value is not None:
                body[key] = value
        if isinstance(settings.think, str):
            body["reasoning_effort"] = settings.think  # the OpenAI API's level of reasoning
        if settings.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": settings.json_schema},
            }
        body.update(settings.extra)
        return body

    @property
    def supports_images(self) -> bool:
        """``True``: the API cannot say whether its model sees, so a request with images is sent and the server says
        (llama.cpp's answer for a model without vision becomes a :class:`ModelError` naming what to do)."""
        return True

    @property
    def sends_image_urls(self) -> bool:
        """``True``: OpenAI's ``image_url`` part takes an ``http(s)`` URL, which the server fetches."""
        return True

    schema_as_tool = False
    """The server refused ``response_format``: a JSON schema is asked for as a forced tool call instead."""

    def refuse_images(self, request: ModelRequest) -> None:
        """Raise, before anything is sent, when the request shows images this model cannot be shown
        (:meth:`~cortana.models.base.ModelClient.images_refused`)."""
        refused = self.images_refused(images_of(request.messages))
        if refused is not None:
            raise refused

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The answer's events; a JSON-schema answer goes by ``response_format``, or, on a server that refuses it
        (learned once per client), by a forced ``final_answer`` tool call whose arguments become the answer."""
        self.refuse_images(request)
        if request.settings.json_schema is None or not self.schema_as_tool:
            started = False
            try:
                async with closing(self._stream(request)) as opened:
                    async for event in opened:
                        started = True
                        yield event
                return
            except ModelError as error:
                refused = request.settings.json_schema is not None and _refuses_schema(str(error))
                if started or not refused:
                    raise
            self.schema_as_tool = True
        async with closing(self._schema_by_tool(request)) as opened:
            async for event in opened:
                yield event

    async def _schema_by_tool(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        schema = request.settings.json_schema or {}
        wrapped = schema.get("type") != "object"
        parameters = schema
        if wrapped:  # tool arguments are an object: the value goes under "value", its definitions at the top
            inner = {key: value for key, value in schema.items() if key != "$defs"}
            parameters = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
            if "$defs" in schema:
                parameters["$defs"] = schema["$defs"]
        tool = ToolSpec(FINAL_ANSWER, "Give the final answer.", parameters)
        settings = dataclasses.replace(request.settings, json_schema=None, tool_choice=FINAL_ANSWER)
        routed = dataclasses.replace(request, tools=[tool], settings=settings)
        async with closing(self._stream(routed)) as opened:
            async for event in opened:
                if not isinstance(event, ModelResponse):
                    yield event
                    continue
                calls = [call for call in event.message.tool_calls if call.name == FINAL_ANSWER]
                if not calls:
                    yield event  # no call: the text answer, validated (and retried) by the caller
                    continue
                arguments = calls[0].arguments
                text = json.dumps(arguments.get("value") if wrapped else arguments, ensure_ascii=False)
                yield TextDelta(text)
                message = event.message.model_copy(update={"content": text, "tool_calls": []})
                yield dataclasses.replace(event, message=message)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if not request.streamed:
            for event in await self._whole(request):
                yield event
            return
        answer = AnswerBuilder(request.tools, self.recover_text_tool_calls)
        usage = Usage()
        finish_reason: str | None = None
        reported_model: str | None = None
        done = False
        lines = self.http.stream_lines(
            f"{self.api_path}/chat/completions", self.request_body(request), on_error=self.error_for
        )
        async with aclosing(lines):
            async for line in lines:
                # Read on to the end of the body even after [DONE]: a response closed early
                # cannot go back to the pool, and every later call would pay for a new connection.
                if done or not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    continue
                try:
                    chunk = json.loads(data)
                except (ValueError, RecursionError) as exc:
                    raise ModelError(
                        f"{self.engine} at {self.base_url} sent an event that is not JSON "
                        f"({type(exc).__name__}): {data[:200]!r}"
                    ) from None
                if not isinstance(chunk, dict):
                    raise ModelError(f"{self.engine} at {self.base_url} sent {data[:200]!r} where an object belongs")
                if "error" in chunk:
                    raise ModelError(f"{self.engine} reported an error mid-answer: {error_text(data)}")
                where = f"{self.engine} at {self.base_url}"
                model = chunk.get("model")
                reported_model = model if isinstance(model, str) and model else reported_model
                if chunk.get("usage") or chunk.get("timings"):
                    usage = self._usage(
                        json_object(chunk.get("usage"), "usage", where),
                        json_object(chunk.get("timings"), "timings", where),
                        usage,
                    )
                for item in json_items(chunk.get("choices"), "choices", where):
                    choice = json_object(item, "a choice", where)
                    delta = json_object(choice.get("delta"), "a delta", where)
                    if thinking := json_text(delta.get("reasoning_content"), "reasoning_content", where):
                        yield answer.add_thinking(thinking)
                    if content := json_text(delta.get("content"), "content", where):
                        for shown in answer.add_text(content):
                            yield shown
                    for entry in json_items(delta.get("tool_calls"), "tool_calls", where):
                        call = json_object(entry, "a tool call", where)
                        function = json_object(call.get("function"), "a tool call's function", where)
                        answer.add_call_delta(
                            call_index(call.get("index", 0), where),
                            id=json_text(call.get("id"), "a tool call's id", where),
                            name=json_text(function.get("name"), "a tool call's name", where),
                            arguments=json_text(function.get("arguments"), "a tool call's arguments", where),
                        )
                    if reason := json_text(choice.get("finish_reason"), "finish_reason", where):
                        finish_reason = reason
        if not done and finish_reason is None:
            raise answer.interrupted(f"{self.engine} at {self.base_url}")
        stop: StopReason = "length" if finish_reason == "length" else "stop"
        for event in answer.final_events(usage, stop, reported_model or self.model):
            yield event

    async def _whole(self, request: ModelRequest) -> list[ModelEvent]:
        """The answer asked for whole (``"stream": false``: one JSON reply), as the events a stream would end with.

        For a caller that does not read the answer as it arrives (:attr:`ModelRequest.streamed`): the same
        answer, read and checked the same way (text calls recovered, arguments parsed), for one parse of one
        body instead of an event per token.
        """
        body = self.request_body(request)
        body["stream"] = False
        body.pop("stream_options", None)
        data = await self.http.request_json(
            "POST",
            f"{self.api_path}/chat/completions",
            json_body=body,
            on_error=self.error_for,
            request_timeout=WHOLE_ANSWER_TIMEOUT_S,
        )
        where = f"{self.engine} at {self.base_url}"
        reply = json_object(data, "the reply", where)
        if "error" in reply:
            raise ModelError(f"{self.engine} reported an error: {error_text(json.dumps(reply))}")
        choices = json_items(reply.get("choices"), "choices", where)
        if not choices:
            raise ModelError(f"{where} answered with no choice: {json.dumps(reply)[:200]!r}")
        usage = self._usage(
            json_object(reply.get("usage"), "usage", where),
            json_object(reply.get("timings"), "timings", where),
            Usage(),
        )
        return self._choice_events(reply, choices[0], AnswerBuilder(request.tools, self.recover_text_tool_calls), usage)

    def _choice_events(self, reply: dict[str, Any], item: Any, answer: AnswerBuilder, usage: Usage) -> list[ModelEvent]:
        """One choice of a whole reply (``"stream": false``), read into ``answer``: the events a stream of it would
        have ended with (its thinking, its text as far as it is shown, then the ``ModelResponse``)."""
        where = f"{self.engine} at {self.base_url}"
        choice = json_object(item, "a choice", where)
        message = json_object(choice.get("message"), "a choice's message", where)
        events: list[ModelEvent] = []
        if thinking := json_text(message.get("reasoning_content"), "reasoning_content", where):
            events.append(answer.add_thinking(thinking))
        if content := json_text(message.get("content"), "content", where):
            events.extend(answer.add_text(content))
        for entry in json_items(message.get("tool_calls"), "tool_calls", where):
            call = json_object(entry, "a tool call", where)
            function = json_object(call.get("function"), "a tool call's function", where)
            answer.add_call(
                json_text(function.get("name"), "a tool call's name", where) or "",
                json_text(function.get("arguments"), "a tool call's arguments", where) or "",
                json_text(call.get("id"), "a tool call's id", where),
            )
        model = reply.get("model")
        stop: StopReason = "length" if choice.get("finish_reason") == "length" else "stop"
        return [*events, *answer.final_events(usage, stop, model if isinstance(model, str) and model else self.model)]

    @staticmethod
    def _usage(usage: dict[str, Any] | None, timings: dict[str, Any] | None, previous: Usage) -> Usage:
        """Usage from the OpenAI ``usage`` object, else from llama.cpp's ``timings`` (cache_n + prompt_n).

        A count that is not a whole number of tokens reads as 0: usage is reported, never trusted.
        """
        if usage:
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            if cached is None and timings:
                cached = timings.get("cache_n")
            return Usage(
                prompt_tokens=token_count(usage.get("prompt_tokens")),
                completion_tokens=token_count(usage.get("completion_tokens")),
                cached_tokens=token_count(cached),
            )
        if previous.prompt_tokens or not timings:
            return previous
        cached = token_count(timings.get("cache_n"))
        return Usage(
            prompt_tokens=cached + token_count(timings.get("prompt_n")),
            completion_tokens=token_count(timings.get("predicted_n")),
            cached_tokens=cached,
        )

    def error_for(self, status: int, body: str) -> Exception | None:
        """Our error for the server's error answer (``None``: the generic message); adapters add their own cases."""
        text = error_text(body)
        try:
            error = json.loads(body).get("error", {})
        except (ValueError, AttributeError):
            error = {}
        if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
            return ContextOverflow(
                f"The prompt ({error.get('n_prompt_tokens', '?')} tokens) does not fit the context window "
                f"{self.engine} serves ({error.get('n_ctx', '?')} tokens). Start a new thread, compact the "
                "conversation, or give the engine a larger context window.",
                prompt_tokens=error.get("n_prompt_tokens"),
                context_window=error.get("n_ctx"),
            )
        if "image input is not supported" in text:  # llama.cpp's server (and Docker Model Runner's) without vision
            return ModelError(f"{self.engine} ({self.model}) cannot be shown images ({text}): {self.images_hint()}.")
        if status == 404 or ("not found" in text.lower() and "model" in text.lower()):
            return ModelNotFound(
                f"{self.engine} has no model '{self.model}': {text}. {self.pull_hint()}", model=self.model
            )
        return None

    def pull_hint(self) -> str:
        """How to get a missing model on this engine."""
        return "Load the model on the server, or choose one it lists."


FINAL_ANSWER = "final_answer"
"""The tool a JSON-schema answer is asked for through, on servers without ``response_format``."""


def _refuses_schema(message: str) -> bool:
    """Whether a server's error refuses ``response_format`` / a JSON schema (rather than failing otherwise)."""
    return re.search(r"response_format|json_schema", message, re.IGNORECASE) is not None

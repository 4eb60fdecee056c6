"""OpenAI's chat-completions protocol, in one place: requests read into a turn, turns written as responses.

``cortana serve`` (``cortana.serve.http``) is the HTTP around it; everything that knows OpenAI's shapes is here:
the request's checks and settings (:func:`read_request`), its ``messages`` as a :class:`ChatInput`
(:func:`parse_messages`), and the answer written back whole (:func:`completion`) or as chunks (:class:`Chunks`),
with usage, tool activity in the documented ``cortana`` field, and errors in OpenAI's shape (:func:`error_body`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from cortana.models.base import ModelSettings
from cortana.serve.conversations import Turn
from cortana.serve.service import BadRequest, ChatInput, ChatService, ToolActivity, TurnEnd

__all__ = [
    "ChatRequest",
    "Chunks",
    "check_request",
    "completion",
    "error_body",
    "finish_reason",
    "parse_messages",
    "read_request",
    "request_settings",
    "usage_of",
]


def error_body(message: str, kind: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or a list of text parts; anything else is a clear 400."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise BadRequest(
                    f"{where}.content[{index}] is a {kind or type(part).__name__} part; only text parts are "
                    "understood (the assistant's models read text)",
                    f"{where}.content",
                )
        return "\n".join(texts)
    raise BadRequest(f"{where}.content must be a string or a list of text parts", f"{where}.content")


def parse_messages(messages: Any, *, max_messages: int) -> ChatInput:
    """A chat-completions ``messages`` list as :class:`ChatInput`; :class:`BadRequest` names what is wrong."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", "messages")
    if len(messages) > max_messages:
        raise BadRequest(
            f"messages holds {len(messages)} messages, more than this server takes ({max_messages}); the assistant "
            "keeps the conversation itself, so send the newest messages, or raise serve.max_messages in cortana.yml",
            "messages",
        )
    system: list[str] = []
    dialogue: list[Turn] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise BadRequest(f"{where} must be an object with role and content", where)
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text(message.get("content"), where))
        elif role in ("user", "assistant"):
            if role == "assistant" and message.get("tool_calls"):
                raise BadRequest(
                    f"{where} has tool_calls: tools run on the server here, so a client's own tool calls are not "
                    "taken; send the conversation's text",
                    f"{where}.tool_calls",
                )
            dialogue.append((role, _text(message.get("content"), where)))
        elif role in ("tool", "function"):
            raise BadRequest(
                f"{where} is a {role} result: tools run on the server here, so a client's own tools are not taken",
                f"{where}.role",
            )
        else:
            raise BadRequest(
                f"{where}.role must be system, developer, user or assistant, not {role!r}", f"{where}.role"
            )
    if not dialogue or dialogue[-1][0] != "user":
        raise BadRequest("the last message must be the user's (the assistant answers it)", "messages")
    prompt = dialogue.pop()[1]
    if not prompt.strip():
        raise BadRequest("the last user message is empty", f"messages[{len(messages) - 1}].content")
    return ChatInput(prompt, tuple(dialogue), "\n\n".join(text for text in system if text.strip()))


def request_settings(service: ChatService, body: dict[str, Any]) -> ModelSettings | None:
    """The agent's generation settings with the request's ``temperature``, ``max_tokens`` and ``seed``."""
    changes: dict[str, Any] = {}
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
            raise BadRequest("temperature must be a number from 0 to 2", "temperature")
        changes["temperature"] = float(temperature)
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequest(f"{name} must be a positive integer", name)
        configured = service.assistant.settings.max_tokens
        changes["max_tokens"] = min(value, configured) if configured else value
        break
    seed = body.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise BadRequest("seed must be a whole number from 0 to 2**63 - 1", "seed")
        changes["seed"] = seed
    if not changes:
        return None
    agent = service.assistant.ready_agent
    base = (agent.settings if agent is not None else None) or ModelSettings(
        temperature=service.assistant.settings.temperature,
        max_tokens=service.assistant.settings.max_tokens,
        seed=service.assistant.settings.seed,
    )
    return dataclasses.replace(base, **changes)


def check_request(body: Any) -> None:
    """What the server does not do, refused clearly: more than one choice, client tools, structured output."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if body.get("tools") or body.get("functions"):
        raise BadRequest(
            "tools run on the server here (the assistant's own, inside its permission gate); a client's tools are "
            "not taken: leave out tools",
            "tools" if body.get("tools") else "functions",
        )
    n = body.get("n")
    if n is not None and n != 1:
        raise BadRequest("only one choice is answered: n must be 1", "n")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") not in (None, "text"):
        raise BadRequest("only text answers are served (response_format type 'text')", "response_format")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("stream must be true or false", "stream")


def usage_of(end: TurnEnd) -> dict[str, Any]:
    """OpenAI's usage object from a run's metrics (every model call of the turn, tool rounds included)."""
    metrics = end.result.metrics
    return {
        "prompt_tokens": metrics.prompt_tokens,
        "completion_tokens": metrics.completion_tokens,
        "total_tokens": metrics.prompt_tokens + metrics.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": metrics.cached_prompt_tokens},
    }


def finish_reason(end: TurnEnd) -> str:
    """OpenAI's ``finish_reason`` of a turn: ``length`` when the last model call hit ``max_tokens``."""
    return "length" if end.result.stop_reason == "length" else "stop"


@dataclass(frozen=True)
class ChatRequest:
    """A chat-completions request as the server takes it.

    Attributes:
        chat: the messages, as the assistant takes them.
        model: the model the client named (None: the default).
        settings: the generation settings the request changes (None: the agent's own).
        thread_name: the thread the client names (``X-Cortana-Thread``, else ``user``), or None.
        stream: answer as server-sent events.
        include_usage: with ``stream``, a last chunk carries usage (``stream_options.include_usage``).
    """

    chat: ChatInput
    model: str | None = None
    settings: ModelSettings | None = None
    thread_name: str | None = None
    stream: bool = False
    include_usage: bool = False


def read_request(body: Any, service: ChatService, *, thread_header: str | None = None) -> ChatRequest:
    """``body`` (parsed JSON) as a :class:`ChatRequest`; :class:`BadRequest` names the field at fault."""
    check_request(body)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("model must be a string", "model")
    chat = parse_messages(body.get("messages"), max_messages=service.max_messages)
    name = thread_header or body.get("user") or None
    if name is not None and not isinstance(name, str):
        raise BadRequest("user must be a string", "user")
    options = body.get("stream_options")
    return ChatRequest(
        chat,
        model=model,
        settings=request_settings(service, body),
        thread_name=name,
        stream=bool(body.get("stream")),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage")),
    )


def completion(end: TurnEnd, *, completion_id: str, model: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole answer: ``chat.completion`` with usage, and the thread and tool activity under ``cortana``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": end.shown}, "finish_reason": finish_reason(end)}
        ],
        "usage": usage_of(end),
        "cortana": {"thread": end.thread.thread_id, "tools": tools},
    }


class Chunks:
    """A streamed answer's server-sent events: ``chat.completion.chunk`` objects, then ``data: [DONE]``.

    Text goes in ``choices[0].delta.content``; tool activity in a chunk whose delta is empty, under the
    ``cortana`` field plain clients ignore; the end in a chunk with ``finish_reason`` (and the thread), then
    usage when asked for; an error after the start is OpenAI's error object as an event.
    """

    def __init__(self, completion_id: str, model: str) -> None:
        self.completion_id = completion_id
        self.model = model
        self.created = int(time.time())

    def _event(self, delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        """One event; ``delta=None``: no choice at all (the usage chunk)."""
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        data = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    def start(self) -> str:
        """The first chunk: the assistant's role."""
        return self._event({"role": "assistant", "content": ""})

    def text(self, text: str) -> str:
        """A piece of the answer."""
        return self._event({"content": text})

    def activity(self, activity: ToolActivity) -> str:
        """A tool call starting or ending."""
        return self._event({}, cortana=activity.as_json())

    def end(self, end: TurnEnd, *, include_usage: bool) -> list[str]:
        """The last chunks: the finish reason and thread, usage when asked for, and ``[DONE]``."""
        events = [self._event({}, finish_reason(end), cortana={"type": "end", "thread": end.thread.thread_id})]
        if include_usage:
            events.append(self._event(None, usage=usage_of(end)))
        return [*events, self.done()]

    @staticmethod
    def error(body: dict[str, Any]) -> list[str]:
        """A failure after the stream began: the error object as an event, then ``[DONE]``."""
        return [f"data: {json.dumps(body)}\n\n", Chunks.done()]

    @staticmethod
    def done() -> str:
        return "data: [DONE]\n\n"

"""Ollama through its native API: ``/api/chat``, ``/api/show``, ``/api/embed``, ``/api/tags``.

One fixed ``num_ctx`` is sent with every request of a session, because a
changing value makes Ollama reload the model. It comes from, first found: the
``context_window`` argument (cortana.yml's, in the CLI), ``OLLAMA_CONTEXT_WINDOW``,
``OLLAMA_CONTEXT_LENGTH`` (``cortana.config.requested_context_window``), the
``num_ctx`` the model's Modelfile sets, or the model's trained length from
``/api/show``, capped at ``MAX_DEFAULT_NUM_CTX`` so a 128k-token model does
not fill a laptop's memory by default.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from cortana.config import ollama_host, requested_context_window
from cortana.engines import engine_named
from cortana.errors import ContextOverflow, ModelError, ModelNotFound, UserError
from cortana.messages import IMAGE_TOKENS, Image, Message, StopReason, Usage, images_of
from cortana.models._http import HttpClient, HttpEngine, error_text
from cortana.models.answer import AnswerBuilder
from cortana.models.base import ModelEvent, ModelRequest, ThinkLevel
from cortana.models.chunks import json_items, json_object, json_text, token_count

__all__ = ["DEFAULT_OLLAMA_URL", "MAX_DEFAULT_NUM_CTX", "OllamaClient", "ollama_base_url"]

DEFAULT_OLLAMA_URL = engine_named("ollama").default_url or ""
MAX_DEFAULT_NUM_CTX = 32768


def ollama_base_url(value: str | None = None) -> str:
    """The Ollama address: ``value``, else ``OLLAMA_HOST`` (``host``, ``host:port`` or a URL), else the default."""
    host = value or ollama_host() or ""
    if not host:
        return DEFAULT_OLLAMA_URL
    if "://" not in host:
        host = f"http://{host}"
    scheme, _, rest = host.partition("://")
    hostport = rest.split("/", 1)[0]
    if hostport.startswith("0.0.0.0"):
        hostport = "127.0.0.1" + hostport[len("0.0.0.0") :]  # a bind address; connect to loopback
    if ":" not in hostport.rsplit("]", 1)[-1]:
        hostport += ":11434"
    return f"{scheme}://{hostport}"


def _modelfile_num_ctx(parameters: str) -> int | None:
    """``num_ctx`` from ``/api/show``'s parameters text (one ``key value`` per line), if the model sets one."""
    for line in parameters.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    return None


def _ollama_image(image: Image) -> str:
    """One image as ``/api/chat`` takes it: its bytes in base64, no ``data:`` prefix (docs/api.md, "Chat request
    (with images)"; api/types.go ``ImageData []byte``, which Go's JSON reads from standard base64)."""
    if image.data is None:
        raise UserError(f"Ollama is sent images as bytes only, and {image.label} is a URL: give the file instead.")
    return image.base64()


def to_ollama_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in Ollama's chat format (tool arguments as objects, results named by tool, images in base64)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.images:
            item["images"] = [_ollama_image(image) for image in message.images]
        if message.role == "assistant" and message.tool_calls:
            item["tool_calls"] = [
                {"id": call.id, "function": {"index": index, "name": call.name, "arguments": call.arguments}}
                for index, call in enumerate(message.tool_calls)
            ]
        if message.role == "tool":
            item["tool_name"] = message.name  # documented since v0.9.6
            item["tool_call_id"] = message.tool_call_id  # accepted since v0.12.10
        out.append(item)
    return out


class OllamaClient(HttpClient):
    """A ``ModelClient`` for Ollama's native API.

    Args:
        model: the model name, e.g. ``qwen2.5-coder:1.5b``.
        base_url: default ``OLLAMA_HOST`` or ``http://127.0.0.1:11434``.
        context_window: ``num_ctx`` to send (else ``OLLAMA_CONTEXT_WINDOW``/``OLLAMA_CONTEXT_LENGTH``,
            else the Modelfile's, else the trained length capped at 32k).
        keep_alive: how long Ollama keeps the model loaded (``"5m"``, ``-1``...).
        think: ask thinking models to think (``True``/``False``, or a level ``"low"``/``"medium"``/``"high"``
            for models with levels; ``None``: the model's default).
        recover_text_tool_calls: recover tool calls the model wrote as text.
        transport: an httpx transport, for tests.
    """

    engine = "Ollama"
    supports_embeddings = True  # /api/embed, with an embedding model
    can_list_models = True  # the pulled models
    can_switch_model = True  # any pulled model

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        context_window: int | None = None,
        keep_alive: str | int | None = None,
        think: bool | ThinkLevel | None = None,
        recover_text_tool_calls: bool = True,
        timeout: float = 600.0,
        max_retries: int = 2,
        transport: Any = None,
    ) -> None:
        self.model = model
        self.keep_alive = keep_alive
        self.think = think
        self.recover_text_tool_calls = recover_text_tool_calls
        self._requested_window = requested_context_window(context_window)
        self._context_window = self._requested_window
        self.capabilities: list[str] = []
        self._tokens_per_char = 1 / 3.5  # English text averages ~4 characters a token; JSON and code fewer
        self.model_length: int | None = None
        self.http = HttpEngine(
            ollama_base_url(base_url),
            engine="Ollama",
            start_hint="Start it with `ollama serve`, or set engine: llamacpp in cortana.yml, "
            "or install `cortana[local]` for the embedded engine.",
            timeout=timeout,
            max_retries=max_retries,
            transport=transport,
        )

    async def connect(self) -> OllamaClient:
        """Read the model's length and capabilities from ``/api/show`` and fix ``num_ctx`` for the session."""
        show = await self.http.request_json("POST", "/api/show", json_body={"model": self.model}, on_error=self._error)
        self.capabilities = list(show.get("capabilities") or [])
        info = show.get("model_info") or {}
        length = info.get(f"{info.get('general.architecture')}.context_length")
        self.model_length = length if isinstance(length, int) else None
        if self._context_window is None:
            self._context_window = _modelfile_num_ctx(show.get("parameters") or "") or (
                min(self.model_length, MAX_DEFAULT_NUM_CTX) if self.model_length else None
            )
        return self

    @property
    def supports_thinking(self) -> bool:
        """Whether ``/api/show`` listed the ``thinking`` capability."""
        return "thinking" in self.capabilities

    @property
    def supports_images(self) -> bool:
        """Whether ``/api/show`` listed the ``vision`` capability (read by :meth:`connect`)."""
        return "vision" in self.capabilities

    def images_hint(self) -> str:
        return (
            "use a vision model, such as qwen2.5vl or gemma3 (`ollama pull qwen2.5vl`; `ollama show MODEL` lists "
            "'vision' under Capabilities)"
        )

    async def list_models(self) -> list[str]:
        """Names of the locally pulled models (``/api/tags``)."""
        data = await self.http.request_json("GET", "/api/tags")
        return [item["name"] for item in data.get("models", [])]

    async def switch_model(self, model: str) -> None:
        """Use ``model`` from now on; its window and capabilities are read again from ``/api/show``."""
        previous = (self.model, self._context_window, self.capabilities, self.model_length)
        self.model, self._context_window = model, self._requested_window
        try:
            await self.connect()
        except BaseException:
            self.model, self._context_window, self.capabilities, self.model_length = previous
            raise

    async def embed(self, texts: list[str], *, model: str | None = None) -> list[list[float]]:
        """Embeddings from ``/api/embed``, in input order (``model``: an embedding model, else the chat model)."""
        data = await self.http.request_json(
            "POST", "/api/embed", json_body={"model": model or self.model, "input": texts}, on_error=self._error
        )
        return [list(map(float, vector)) for vector in data["embeddings"]]

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of ``/api/chat`` for ``request``."""
        settings = request.settings
        options: dict[str, Any] = {}
        if self._context_window:
            options["num_ctx"] = self._context_window
        for key, value in (
            ("temperature", settings.temperature),
            ("num_predict", settings.max_tokens),
            ("seed", settings.seed),
        ):
            if value is not None:
                options[key] = value
        body: dict[str, Any] = {"model": self.model, "messages": to_ollama_messages(request.messages), "stream": True}
        if request.tools:
            body["tools"] = [t.as_function() for t in request.tools]
        if options:
            body["options"] = options
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        think = settings.think if settings.think is not None else self.think
        if think is not None:
            body["think"] = think
        if settings.json_schema is not None:
            body["format"] = settings.json_schema  # Ollama's structured outputs: a JSON schema as `format`
        body.update(settings.extra)
        return body

    def estimate_tokens(self, request: ModelRequest) -> int:
        """A conservative estimate of the prompt's tokens (Ollama has no tokenizer endpoint); each image counts as
        :data:`~cortana.messages.IMAGE_TOKENS`, never as the characters of its base64."""
        return int(self._text_chars(request) * self._tokens_per_char) + IMAGE_TOKENS * len(images_of(request.messages))

    def _text_chars(self, request: ModelRequest) -> int:
        """The characters of the prompt's messages and tools as sent, images left out."""
        messages = request.messages
        if images_of(messages):
            messages = [message.model_copy(update={"images": []}) for message in messages]
        texts = to_ollama_messages(messages)
        return len(json.dumps(texts, ensure_ascii=False)) + len(json.dumps([t.as_function() for t in request.tools]))

    def _check_fits(self, request: ModelRequest) -> None:
        """Ollama silently drops the start of a prompt longer than ``num_ctx``: refuse it instead."""
        if not self._context_window:
            return
        estimate = self.estimate_tokens(request)
        if estimate > self._context_window:
            raise ContextOverflow(
                f"The prompt (about {estimate:,} tokens) does not fit the {self._context_window:,}-token context "
                "window sent to Ollama (num_ctx), and Ollama would silently drop its start. Start a new thread, "
                "compact the conversation, or raise OLLAMA_CONTEXT_WINDOW.",
                prompt_tokens=estimate,
                context_window=self._context_window,
            )

    def _calibrate(self, request: ModelRequest, prompt_tokens: int) -> None:
        """Learn tokens per character from Ollama's own count; only ever upward, so estimates stay conservative.

        Not from a prompt with images: their tokens are in Ollama's count but have no characters to divide by.
        """
        if images_of(request.messages):
            return
        chars = self._text_chars(request)
        if chars and prompt_tokens / chars > self._tokens_per_char:
            self._tokens_per_char = prompt_tokens / chars

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        refused = self.images_refused(images_of(request.messages))
        if refused is not None:
            raise refused
        self._check_fits(request)
        answer = AnswerBuilder(request.tools, self.recover_text_tool_calls)
        final: dict[str, Any] | None = None
        lines = self.http.stream_lines("/api/chat", self.request_body(request), on_error=self._error)
        async with aclosing(lines):
            async for line in lines:
                if final is not None:  # read on to the end of the body, so the connection goes back to the pool
                    continue
                chunk = _decode(line, self.base_url)
                if chunk.get("error"):
                    raise ModelError(f"Ollama reported an error mid-answer: {chunk['error']}")
                where = f"Ollama at {self.base_url}"
                message = json_object(chunk.get("message"), "a message", where)
                if thinking := json_text(message.get("thinking"), "thinking", where):
                    yield answer.add_thinking(thinking)
                if content := json_text(message.get("content"), "content", where):
                    for shown in answer.add_text(content):
                        yield shown
                for entry in json_items(message.get("tool_calls"), "tool_calls", where):
                    call = json_object(entry, "a tool call", where)
                    function = json_object(call.get("function"), "a tool call's function", where)
                    arguments = function.get("arguments") or {}
                    if not isinstance(arguments, dict | str):
                        raise ModelError(f"{where} sent tool call arguments that are neither an object nor text")
                    name = json_text(function.get("name"), "a tool call's name", where) or ""
                    answer.add_call(name, arguments, id=json_text(call.get("id"), "a tool call's id", where))
                if chunk.get("done"):
                    final = chunk
        if final is None:
            raise answer.interrupted(f"Ollama at {self.base_url}")
        usage = Usage(
            prompt_tokens=token_count(final.get("prompt_eval_count")),
            completion_tokens=token_count(final.get("eval_count")),
        )
        self._calibrate(request, usage.prompt_tokens)
        finish_reason: StopReason = "length" if final.get("done_reason") == "length" else "stop"
        model = final.get("model")
        for event in answer.final_events(
            usage, finish_reason, model if isinstance(model, str) and model else self.model
        ):
            yield event

    def _error(self, status: int, body: str) -> Exception | None:
        text = error_text(body)
        if status == 404 or ("not found" in text and "model" in text):
            return ModelNotFound(
                f"Ollama has no model '{self.model}' ({text}). Pull it with `ollama pull {self.model}`.",
                model=self.model,
            )
        if "does not support tools" in text:
            return ModelError(
                f"{text}. Pick a model with tool support (`ollama show MODEL` lists 'tools' under Capabilities)."
            )
        return None


def _decode(line: str, where: str) -> dict[str, Any]:
    """One NDJSON line of Ollama's stream; anything unreadable is a ``ModelError``, never a traceback."""
    try:
        chunk = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ModelError(
            f"Ollama at {where} sent a line that is not JSON ({type(exc).__name__}): {line[:200]!r}"
        ) from None
    if not isinstance(chunk, dict):
        raise ModelError(f"Ollama at {where} sent {type(chunk).__name__} where a JSON object belongs: {line[:200]!r}")
    return chunk

"""llama.cpp's ``llama-server``: the OpenAI-compatible chat plus its own endpoints.

``/props`` (and ``/slots``) tell the context window one request really gets,
``/health`` whether the model is loaded, ``/apply-template`` + ``/tokenize``
count a prompt's tokens exactly before it is sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from cortana.engines import engine_named
from cortana.errors import ModelError
from cortana.messages import IMAGE_TOKENS, Message, Usage, images_of
from cortana.models.answer import AnswerBuilder
from cortana.models.base import THINKING_BUDGETS, ModelEvent, ModelRequest, ModelResponse, ToolSpec
from cortana.models.chunks import json_items, json_object
from cortana.models.guided import GuidedCalls, template_supports_guiding
from cortana.models.openai_compat import OpenAICompatClient, to_openai_messages

__all__ = ["DEFAULT_LLAMACPP_URL", "LlamaCppClient"]

DEFAULT_LLAMACPP_URL = engine_named("llamacpp").default_url or ""


class LlamaCppClient(OpenAICompatClient):
    """A ``ModelClient`` for a running ``llama-server``.

    Call :meth:`connect` (``create_model_client`` does) to read the real
    context window from ``/props``; ``context_window=`` is only a fallback.

    Args:
        guided_tool_calls: when tools are offered and the served chat template
            teaches ``<tool_call>`` blocks, decide first and write calls under a
            grammar (see ``cortana.models.guided``); off: the OpenAI chat path.
        max_parallel_calls: the most calls one guided answer may hold.
        check_margin: reject guided calls when the check's log P(no) - log P(yes)
            reaches this; ``None`` (the default): the model's own yes or no. The
            embedded engine sets the value measured for each bundled model.
        check_purpose: with ``check_margin``, how much it rises for each word the question shares with the called
            tool's name and description (``guided.purpose_words``).
        kwargs: as for :class:`OpenAICompatClient`.
    """

    engine = "llama.cpp"
    supports_grammar = True  # GBNF in the request body
    supports_token_counting = True  # the chat template (/apply-template), then the tokenizer (/tokenize)
    api_path: ClassVar[str] = "/v1"
    start_hint: ClassVar[str] = (
        "Start it with `llama-server -m MODEL.gguf --jinja --port 8080`, or install `cortana[local]` "
        "and let Cortana start its embedded engine."
    )

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str = DEFAULT_LLAMACPP_URL,
        guided_tool_calls: bool = True,
        max_parallel_calls: int = 4,
        check_margin: float | None = None,
        check_purpose: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, base_url=base_url, **kwargs)
        self.props: dict[str, Any] = {}
        self.guided_tool_calls = guided_tool_calls
        self.guided = GuidedCalls(
            self.http,
            engine=self.engine,
            max_calls=max_parallel_calls,
            verify_margin=check_margin,
            purpose_step=check_purpose,
            on_error=self.error_for,
        )

    async def connect(self) -> LlamaCppClient:
        """Check the server is healthy and read its real context window and model name."""
        health = await self.http.request_json("GET", "/health", on_error=self._health_error)
        if health.get("status") not in ("ok", None):
            raise ModelError(f"llama.cpp at {self.base_url} is not ready: {health}")
        self.props = await self.http.request_json("GET", "/props")
        window = (self.props.get("default_generation_settings") or {}).get("n_ctx")
        slots = await self._slots()
        if slots:
            slot_windows = [slot["n_ctx"] for slot in slots if slot.get("n_ctx")]
            window = min([*slot_windows, *([window] if window else [])]) if slot_windows else window
        if window:
            self._context_window = int(window)
        if not self.model:
            self.model = str(self.props.get("model_alias") or self.props.get("model_path") or "default")
        return self

    async def _slots(self) -> list[dict[str, Any]]:
        try:
            data = await self.http.request_json("GET", "/slots", on_error=lambda status, body: _Unavailable())
        except _Unavailable:
            return []  # started without --slots: /props alone tells the window
        return data if isinstance(data, list) else []

    @property
    def guides_tool_calls(self) -> bool:
        """Whether answers that offer tools are guided: asked for, and the served template allows it."""
        return self.guided_tool_calls and template_supports_guiding(str(self.props.get("chat_template") or ""))

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Guided when tools are offered and :attr:`guides_tool_calls`; else the OpenAI chat path.

        A conversation with images takes the chat path: the guided one renders the prompt as text
        (``/apply-template``), and ``/completion`` would be given the images' markers without the images.
        """
        settings = request.settings
        # /completion returns a thinking model's reasoning inside the text: guide only when it does not think.
        quiet = settings.think is False or (settings.think is None and not self.supports_thinking)
        guided = request.tools and self.guides_tool_calls and settings.tool_choice != "none" and quiet
        if guided and not images_of(request.messages):
            return self.guided.stream(request, self.model)
        return super().stream(request)

    @property
    def supports_images(self) -> bool:
        """Whether the server reads images: ``/props``' ``modalities.vision`` (a model started with its projector,
        ``--mmproj``; read by :meth:`connect`)."""
        modalities = self.props.get("modalities")
        return isinstance(modalities, dict) and modalities.get("vision") is True

    @property
    def sends_image_urls(self) -> bool:
        """``False``: images go as bytes. The server could download an http(s) image itself (when built with
        libcurl, up to 10 MB in 10 s), but Cortana has a local engine fetch nothing the user did not hand it."""
        return False

    def images_hint(self) -> str:
        return (
            "start llama-server with a vision model and its projector, e.g. "
            "`llama-server -hf ggml-org/gemma-3-4b-it-GGUF` (the projector comes with it) or `-m MODEL.gguf "
            "--mmproj MMPROJ.gguf`; or use a vision model such as qwen2.5vl or gemma3 on Ollama"
        )

    @property
    def parallel_samples(self) -> int:
        """The server's slots (``/props``' ``total_slots``): one request of several answers (``n``) reads the prompt
        once and decodes them together, each in a slot; decoding is bound by memory, so four cost little more
        than one (bench/generation.py)."""
        slots = self.props.get("total_slots")
        return slots if isinstance(slots, int) and slots > 0 else 1

    async def complete_many(self, request: ModelRequest, count: int) -> list[ModelResponse]:
        """``count`` answers in requests of up to :attr:`parallel_samples` each (llama.cpp's ``n``)."""
        self.refuse_images(request)
        per_request = min(self.parallel_samples, count)
        if per_request <= 1 or request.tools:
            return await super().complete_many(request, count)
        answers: list[ModelResponse] = []
        while len(answers) < count:
            wanted = min(per_request, count - len(answers))
            seed = None if request.settings.seed is None else request.settings.seed + len(answers)
            settings = dataclasses.replace(request.settings, seed=seed)
            body = self.request_body(ModelRequest(request.messages, [], settings))
            body.update({"stream": False, "n": wanted})
            body.pop("stream_options", None)
            body.pop("id_slot", None)  # the answers take whatever slots are free, never a conversation's own
            data = await self.http.request_json(
                "POST", f"{self.api_path}/chat/completions", json_body=body, on_error=self.error_for
            )
            answers += await self._counted(self._choices(data, wanted))
        return answers

    async def _counted(self, answers: list[ModelResponse]) -> list[ModelResponse]:
        """Each answer with its own generated tokens: llama.cpp's ``usage`` for a reply of several choices counts
        one choice's tokens only (a real capture: three answers "Apple", ``completion_tokens`` 2), so each
        answer is counted again with the engine's tokenizer, plus its end token when it stopped by itself."""
        if len(answers) < 2:
            return answers

        async def tokens(answer: ModelResponse) -> int:
            reply = await self.http.request_json(
                "POST", "/tokenize", json_body={"content": answer.message.content}, on_error=self.error_for
            )
            where = f"{self.engine} at {self.base_url}"
            counted = len(json_items(json_object(reply, "the tokenizer's reply", where).get("tokens"), "tokens", where))
            return counted + (answer.finish_reason == "stop")

        counts = await asyncio.gather(*(tokens(answer) for answer in answers))
        return [
            dataclasses.replace(answer, usage=answer.usage.model_copy(update={"completion_tokens": count}))
            for answer, count in zip(answers, counts, strict=True)
        ]

    def _choices(self, data: Any, wanted: int) -> list[ModelResponse]:
        """The answers of a whole (not streamed) reply with several choices; the usage goes with the first."""
        where = f"{self.engine} at {self.base_url}"
        reply = json_object(data, "the reply", where)
        usage = self._usage(json_object(reply.get("usage"), "usage", where), None, Usage())
        found: list[ModelResponse] = []
        for number, item in enumerate(json_items(reply.get("choices"), "choices", where)[:wanted]):
            events = self._choice_events(reply, item, AnswerBuilder([], False), usage if number == 0 else Usage())
            response = events[-1]
            assert isinstance(response, ModelResponse)  # final_events ends with it
            found.append(response)
        if len(found) < wanted:
            raise ModelError(f"{where} answered {len(found)} of the {wanted} completions asked for")
        return found

    @property
    def supports_thinking(self) -> bool:
        """The served chat template has Qwen3's ``enable_thinking`` switch, or gpt-oss's ``reasoning_effort`` (read
        from ``/props``)."""
        template = str(self.props.get("chat_template") or "")
        return "enable_thinking" in template or "reasoning_effort" in template

    async def count_tokens(self, messages: list[Message], tools: list[ToolSpec] | None = None) -> int:
        """Exact prompt tokens: the server's chat template (tools included), then its tokenizer; each image counts
        as :data:`~cortana.messages.IMAGE_TOKENS` (the tokenizer sees text: an image's tokens depend on the model's
        projector)."""
        images = len(images_of(messages))
        if images:
            messages = [message.model_copy(update={"images": []}) for message in messages]
        body: dict[str, Any] = {"messages": to_openai_messages(messages)}
        if tools:
            body["tools"] = [tool.as_function() for tool in tools]
        rendered = await self.http.request_json("POST", "/apply-template", json_body=body)
        tokens = await self.http.request_json("POST", "/tokenize", json_body={"content": rendered["prompt"]})
        return len(tokens["tokens"]) + IMAGE_TOKENS * images

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The OpenAI body, with ``grammar`` as llama.cpp's own field and ``think`` as the template's
        ``enable_thinking`` switch (and, for gpt-oss's template, its ``reasoning_effort``: ``False`` is ``low``).

        A level keeps thinking on and caps it with ``thinking_budget_tokens`` (:data:`THINKING_BUDGETS`);
        llama.cpp has no levels of its own.
        """
        body = super().request_body(request)
        if request.settings.grammar:
            body["grammar"] = request.settings.grammar
        elif request.settings.json_schema is not None:
            body.pop("response_format", None)
            body["json_schema"] = request.settings.json_schema  # llama.cpp's own field: a grammar from the schema
        think = request.settings.think
        if think is not None:
            body.pop("reasoning_effort", None)  # the OpenAI field; llama.cpp's own control is the budget
            kwargs = dict(body.get("chat_template_kwargs") or {})
            kwargs.setdefault("enable_thinking", think is not False)
            if "reasoning_effort" in str(self.props.get("chat_template") or ""):
                # gpt-oss always reasons; its template writes "Reasoning: low|medium|high" into the system message.
                effort = think if isinstance(think, str) else "low" if think is False else "medium"
                kwargs.setdefault("reasoning_effort", effort)
            body["chat_template_kwargs"] = kwargs
            if isinstance(think, str) and THINKING_BUDGETS[think] >= 0:
                body.setdefault("thinking_budget_tokens", THINKING_BUDGETS[think])
        return body

    def _health_error(self, status: int, body: str) -> Exception | None:
        if status == 503:
            return ModelError(f"llama.cpp at {self.base_url} is still loading its model; retry in a few seconds.")
        return None

    def pull_hint(self) -> str:
        return "llama.cpp serves the one model it was started with (-m MODEL.gguf); restart it with the model you want."


class _Unavailable(Exception):
    pass

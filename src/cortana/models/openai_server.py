"""Any server that speaks the OpenAI API (vLLM, SGLang, LM Studio, a llama.cpp server elsewhere): ``engine: openai``.

The chat, streaming and text tool-call recovery are ``OpenAICompatClient``'s.
What this adapter adds is what such servers differ in:

- where the API sits: ``base_url`` with or without its ``/v1``;
- the model: the one named, which must be listed by ``GET /v1/models``, else the first listed;
- an honest context window from that listing where the server reports one:
  ``max_model_len`` (vLLM, SGLang), ``context_length`` or ``max_context_length``
  (servers that follow OpenRouter's or LM Studio's naming); unknown otherwise, so
  compaction stays off rather than guessing;
- an API key, sent as a bearer token and never written into an error, a log line or
  ``cortana doctor``: a refused key is named as refused, not shown;
- several answers to one prompt (the fix's samples) sent as up to ``parallel`` requests at once, for a
  server that answers them together: Xinference's replicas of a model, vLLM's batches. The OpenAI API's
  ``n`` is not asked for, since such servers differ in whether they honour it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from cortana.errors import ModelError, ModelNotFound, UserError
from cortana.models.base import ModelRequest, ModelResponse, complete
from cortana.models.openai_compat import OpenAICompatClient

__all__ = ["WINDOW_FIELDS", "OpenAIServerClient"]

WINDOW_FIELDS = ("max_model_len", "context_length", "max_context_length")
"""Where servers put the context window they serve in a ``/v1/models`` entry, in the order they are read."""


class OpenAIServerClient(OpenAICompatClient):
    """A ``ModelClient`` for an OpenAI-compatible server at ``base_url``.

    Args:
        model: the model to use ("" for the first the server lists).
        base_url: the server's address, with or without the trailing ``/v1``.
        api_key: sent as ``Authorization: Bearer``; never shown.
        parallel: the most requests :meth:`complete_many` sends at once (a server with that many replicas of the
            model, or slots, answers them together); 1: one after another.
        kwargs: as for :class:`~cortana.models.openai_compat.OpenAICompatClient`.
    """

    engine = "OpenAI-compatible server"
    can_switch_model = True  # any model the server lists
    api_path: ClassVar[str] = "/v1"
    start_hint: ClassVar[str] = (
        "Start the server (e.g. `vllm serve MODEL`), or set base_url in cortana.yml (or OPENAI_BASE_URL) to one "
        "that is running."
    )

    def __init__(
        self, model: str = "", *, base_url: str, api_key: str | None = None, parallel: int = 1, **kwargs: Any
    ) -> None:
        if parallel < 1:
            raise UserError(f"parallel must be at least 1 (requests at once), got {parallel}")
        self.parallel = parallel
        if not base_url:
            raise UserError(
                "engine: openai needs the server's address: set base_url in cortana.yml, OPENAI_BASE_URL, "
                "or pass --base-url (e.g. http://gpu-box:8000/v1)."
            )
        root = base_url.rstrip("/")
        root = root.removesuffix("/v1")  # the API sits at api_path, so an address given with /v1 means the same
        self._keyed = bool(api_key)
        super().__init__(model, base_url=root, api_key=api_key, **kwargs)
        self._given_window = self._context_window

    async def connect(self) -> OpenAIServerClient:
        """Check the server answers, choose the model, and read the window it serves for it."""
        data = await self.http.request_json("GET", f"{self.api_path}/models", on_error=self.error_for)
        entries = [entry for entry in data.get("data", []) if isinstance(entry, dict) and entry.get("id")]
        names = [str(entry["id"]) for entry in entries]
        if not self.model:
            if not names:
                raise ModelError(f"{self.engine} at {self.http.base_url} lists no models; load one on the server.")
            self.model = names[0]
        elif self.model not in names:
            raise ModelNotFound(
                f"{self.engine} at {self.http.base_url} has no model '{self.model}' "
                f"(it lists: {', '.join(names) or 'none'}). {self.pull_hint()}",
                model=self.model,
            )
        entry = entries[names.index(self.model)]
        if self._given_window is None:
            self._context_window = _served_window(entry)
        return self

    async def complete_many(self, request: ModelRequest, count: int) -> list[ModelResponse]:
        """``count`` answers to ``request``, up to :attr:`parallel` requests at once, each with its own seed (one
        more than the last); in the order asked. A server that spreads requests over replicas of the model
        (Xinference) or batches them (vLLM) answers them together."""
        self.refuse_images(request)
        if self.parallel <= 1 or count <= 1:
            return await super().complete_many(request, count)
        gate = asyncio.Semaphore(self.parallel)

        async def one(number: int) -> ModelResponse:
            seed = None if request.settings.seed is None else request.settings.seed + number
            settings = dataclasses.replace(request.settings, seed=seed)
            async with gate:
                return await complete(self, dataclasses.replace(request, settings=settings))

        tasks = [asyncio.ensure_future(one(number)) for number in range(count)]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:  # one failed, or the fix was cancelled (its budget): the others are dropped too
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def switch_model(self, model: str) -> None:
        """Use ``model`` from now on (it must be listed); its window is read again."""
        previous = self.model
        self.model, self._context_window = model, self._given_window
        try:
            await self.connect()
        except ModelNotFound:
            self.model = previous
            raise

    def error_for(self, status: int, body: str) -> Exception | None:
        """A refused or missing key is said as such (never shown); the rest as for any OpenAI-style server."""
        if status in (401, 403):
            given = "was refused" if self._keyed else "is missing"
            return ModelError(
                f"{self.engine} at {self.http.base_url} answered HTTP {status}: the API key {given}. "
                "Set CORTANA_API_KEY (or OPENAI_API_KEY) to the key the server expects."
            )
        return super().error_for(status, body)

    def pull_hint(self) -> str:
        return (
            "Serve it on the server (vLLM and SGLang serve the model they were started with), or choose one it lists."
        )


def _served_window(entry: dict[str, Any]) -> int | None:
    for name in WINDOW_FIELDS:
        value = entry.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None

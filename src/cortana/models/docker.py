"""Docker Model Runner: its OpenAI-compatible API under ``/engines/v1`` and its model listing."""

from __future__ import annotations

from typing import Any, ClassVar

from cortana.engines import engine_named
from cortana.errors import ModelNotFound
from cortana.models.openai_compat import OpenAICompatClient

__all__ = ["DEFAULT_DMR_URL", "DockerModelRunnerClient"]

DEFAULT_DMR_URL = engine_named("docker").default_url or ""


class DockerModelRunnerClient(OpenAICompatClient):
    """A ``ModelClient`` for Docker Model Runner (model names like ``ai/qwen2.5``).

    The context window is ``context_window=`` (cortana.yml) when given, else
    ``dmr.context_window`` from the model listing (runners since v1.1.29, for
    models packaged with one), else unknown.
    """

    engine = "Docker Model Runner"
    can_switch_model = True  # any pulled model, by name
    api_path: ClassVar[str] = "/engines/v1"
    start_hint: ClassVar[str] = (
        "Enable it with `docker desktop enable model-runner --tcp 12434` (Docker Desktop) or install "
        "docker-model-plugin (Docker Engine); or install `cortana[local]` for the embedded engine."
    )

    def __init__(self, model: str = "", *, base_url: str = DEFAULT_DMR_URL, **kwargs: Any) -> None:
        super().__init__(model, base_url=base_url, **kwargs)
        self._given_window = self._context_window

    async def switch_model(self, model: str) -> None:
        """Use ``model`` from now on (it must be pulled); its window is read again from the listing."""
        available = await self.list_models()
        if not any(_same_model(name, model) for name in available):
            raise ModelNotFound(
                f"Docker Model Runner has no model '{model}' (it has: {', '.join(available) or 'none'}). "
                f"Pull it with `docker model pull {model}`.",
                model=model,
            )
        self.model, self._context_window = model, self._given_window
        await self.connect()

    async def connect(self) -> DockerModelRunnerClient:
        """Check the runner answers, pick its first model when none was named, and read its context window."""
        data = await self.http.request_json("GET", f"{self.api_path}/models")
        entries = data.get("data", [])
        if not self.model and entries:
            self.model = entries[0]["id"]
        for entry in entries:
            if _same_model(entry.get("id", ""), self.model):
                window = (entry.get("dmr") or {}).get("context_window")
                if window and self._context_window is None:
                    self._context_window = int(window)  # only when the model was packaged with one
        return self

    def pull_hint(self) -> str:
        return f"Pull it with `docker model pull {self.model}`."


def _same_model(listed: str, wanted: str) -> bool:
    """``ai/qwen2.5:latest`` and ``ai/qwen2.5`` name the same model."""

    def bare(name: str) -> str:
        return name[: -len(":latest")] if name.endswith(":latest") else name

    return bare(listed) == bare(wanted)

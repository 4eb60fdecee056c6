"""Docker Model Runner: its OpenAI-compatible API under ``/engines/v1`` and its model listing."""

from __future__ import annotations

from typing import Any, ClassVar

from cortana.models.openai_compat import OpenAICompatClient

__all__ = ["DEFAULT_DMR_URL", "DockerModelRunnerClient"]

DEFAULT_DMR_URL = "http://127.0.0.1:12434"


class DockerModelRunnerClient(OpenAICompatClient):
    """A ``ModelClient`` for Docker Model Runner (model names like ``ai/qwen2.5``).

    Docker Model Runner does not report the context window it serves, so it is
    what ``context_window=`` (or cortana.yml) says, and unknown otherwise.
    """

    engine: ClassVar[str] = "Docker Model Runner"
    api_path: ClassVar[str] = "/engines/v1"
    start_hint: ClassVar[str] = (
        "Enable it with `docker desktop enable model-runner --tcp 12434` (Docker Desktop) or install "
        "docker-model-plugin (Docker Engine); or install `cortana[local]` for the embedded engine."
    )
    supports_embeddings: ClassVar[bool] = True

    def __init__(self, model: str = "", *, base_url: str = DEFAULT_DMR_URL, **kwargs: Any) -> None:
        super().__init__(model, base_url=base_url, **kwargs)

    async def connect(self) -> DockerModelRunnerClient:
        """Check the runner answers and pick its first model when none was named."""
        models = await self.list_models()
        if not self.model and models:
            self.model = models[0]
        return self

    def pull_hint(self) -> str:
        return f"Pull it with `docker model pull {self.model}`."

"""The fetcher's settings, read from a JSON file."""

import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RETRIES = 3
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Settings:
    url: str
    timeout: float
    retries: int


def load_settings(path: str | Path) -> Settings:
    """The settings in the JSON file at ``path``; ``url`` is required."""
    data = json.loads(Path(path).read_text())
    return Settings(
        url=data["url"],
        timeout=float(data.get("timeout", DEFAULT_TIMEOUT)),
        retries=int(data.get("retries", DEFAULT_RETRIES)),
    )

"""cortana.yml and the environment, validated into one ``Settings`` object.

Where settings come from, later ones winning: the user's file
(``$XDG_CONFIG_HOME/cortana/cortana.yml``, else ``~/.config/cortana/cortana.yml``),
the workspace's ``cortana.yml``, then environment variables. A bad value is a
``ConfigError`` naming the file, the key and what is allowed.

    engine: auto            # auto | ollama | docker | llamacpp | embedded
    model: qwen2.5-coder-1.5b
    context_window: 8192
    threads: 1
    temperature: 0.2        # low: small models call tools more reliably
    agent:
      max_tool_iterations: 10
    permissions:
      allow: [write_file, edit_file]   # tool-name globs that never ask
    memory:
      last_messages: 40
      recall: true
    mcp:
      servers:
        - name: time
          command: mcp-server-time
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cortana.errors import ConfigError
from cortana.mcp import MCPServerConfig

__all__ = ["Settings", "load_settings", "user_config_path"]

FILE_NAME = "cortana.yml"

ENVIRONMENT = {
    "CORTANA_ENGINE": "engine",
    "CORTANA_MODEL": "model",
    "CORTANA_BASE_URL": "base_url",
    "CORTANA_THREADS": "threads",
    "OLLAMA_CONTEXT_WINDOW": "context_window",
    "OLLAMA_CONTEXT_LENGTH": "context_window",
}
"""Environment variables that override a top-level key (``OLLAMA_HOST`` is read by the Ollama adapter)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentSettings(_Section):
    """``agent:`` the assistant's loop."""

    max_tool_iterations: int = Field(10, ge=1)
    max_parallel_tools: int = Field(4, ge=1)
    parallel_tool_calls: bool = True


class PermissionSettings(_Section):
    """``permissions:`` tool-name globs that never ask (``allow``) or are always refused (``deny``)."""

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class MemorySettings(_Section):
    """``memory:`` what the assistant remembers."""

    last_messages: int = Field(40, ge=2)
    working_memory: Literal["resource", "thread", "off"] = "resource"
    recall: bool = True
    recall_top_k: int = Field(3, ge=1, le=20)


class MCPSettings(_Section):
    """``mcp:`` servers whose tools the assistant may load."""

    servers: list[MCPServerConfig] = Field(default_factory=list)


class Settings(_Section):
    """Everything cortana.yml can say."""

    engine: Literal["auto", "ollama", "docker", "llamacpp", "embedded"] = "auto"
    model: str | None = None
    base_url: str | None = None
    context_window: int | None = Field(None, ge=256)
    threads: int | None = Field(None, ge=1)
    parallel: int = Field(1, ge=1)
    temperature: float = Field(0.2, ge=0, le=2)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    mcp: MCPSettings = Field(default_factory=MCPSettings)
    sources: list[str] = Field(default_factory=list, exclude=True)
    """The files and variables these settings came from (for ``cortana doctor``)."""


def user_config_path() -> Path:
    """The user-level cortana.yml."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "cortana" / FILE_NAME


def load_settings(workspace: Path, environ: dict[str, str] | None = None) -> Settings:
    """Settings for ``workspace``: user file, workspace file, environment."""
    environ = dict(os.environ if environ is None else environ)
    merged: dict[str, Any] = {}
    sources: list[str] = []
    for path in (user_config_path(), workspace / FILE_NAME):
        if path.is_file():
            data = _read_yaml(path)
            _validate(data, str(path))  # name the file that holds a bad value
            merged = _deep_merge(merged, data)
            sources.append(str(path))
    for variable, key in ENVIRONMENT.items():
        if environ.get(variable):
            merged[key] = environ[variable]
            sources.append(f"${variable}")
    settings = _validate(merged, " + ".join(sources) or "defaults")
    settings.sources = sources
    return settings


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"is not valid YAML{where}: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"must be a mapping of keys to values, not a {type(data).__name__}", source=str(path))
    return data


def _validate(data: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        allowed = _allowed(error)
        raise ConfigError(f"{error['msg']}{allowed} (got {error.get('input')!r})", key=key, source=source) from None


def _allowed(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "; remove it or check its spelling (docs/cli.md lists every key)"
    context = error.get("ctx") or {}
    if "expected" in context:
        return f"; allowed: {context['expected']}"
    return ""


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged

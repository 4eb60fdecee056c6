"""Workspace trust: a folder's cortana.yml may not run code or widen permissions until its user says so.

A repository is someone else's text. Its ``cortana.yml`` may set the model
and the temperature, but the sections that would run code, let tools run
without asking, or send the conversation off the machine (``SENSITIVE``) only
apply once the user has trusted the folder. Trust is remembered in the user's
Cortana config folder, keyed by the folder's real path and a hash of exactly
those sections: a changed file asks again. Untrusted, or with no terminal to
ask on, those sections are ignored and one line says so. The model's file
tools cannot write the trust file, and any write to ``cortana.yml`` is asked
for every time, so nothing the model writes can make a folder trusted.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cortana.errors import ConfigError

__all__ = [
    "SENSITIVE",
    "TRUST_FILE",
    "TrustDecider",
    "TrustRequest",
    "TrustStore",
    "is_loopback_url",
    "masked_dsn",
    "sensitive_sections",
    "without_sections",
]

SENSITIVE: dict[str, str] = {
    "mcp.servers": "start MCP servers (run their commands, or connect to their addresses)",
    "permissions.allow": "let these tools run without asking",
    "base_url": "send the conversation to an engine on another machine",
    "memory.dsn": "store your conversations in this PostgreSQL database",
}
"""The cortana.yml keys a workspace needs the user's trust for, and what each would do."""

TRUST_FILE = "trusted-folders.json"


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1 or localhost)."""
    try:
        host = urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    except ValueError:  # not a URL at all ("[", "http://[::1"): not this machine, as far as anyone can tell
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def sensitive_sections(data: dict[str, Any]) -> dict[str, Any]:
    """The parts of a cortana.yml's data that need trust (dotted key -> value); empty when none."""
    found: dict[str, Any] = {}
    mcp = data.get("mcp")
    if isinstance(mcp, dict) and mcp.get("servers"):
        found["mcp.servers"] = mcp["servers"]
    permissions = data.get("permissions")
    if isinstance(permissions, dict) and permissions.get("allow"):
        found["permissions.allow"] = permissions["allow"]
    base_url = data.get("base_url")
    if base_url and not (isinstance(base_url, str) and is_loopback_url(base_url)):
        found["base_url"] = base_url
    memory = data.get("memory")
    if isinstance(memory, dict) and memory.get("dsn"):
        found["memory.dsn"] = memory["dsn"]
    return found


def masked_dsn(dsn: str) -> str:
    """A PostgreSQL connection string with its password replaced by ``***`` (URI and key=value forms)."""
    masked = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", masked, flags=re.IGNORECASE)


def without_sections(data: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """``data`` less the dotted ``keys``."""
    kept = {key: (dict(value) if isinstance(value, dict) else value) for key, value in data.items()}
    for dotted in keys:
        *parents, last = dotted.split(".")
        node: Any = kept
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return kept


@dataclass(frozen=True)
class TrustRequest:
    """What a folder's cortana.yml asks for that needs the user's trust.

    Attributes:
        folder: the workspace's real path.
        file: its cortana.yml.
        sections: dotted key -> value of each sensitive section it sets.
    """

    folder: Path
    file: Path
    sections: dict[str, Any]

    @property
    def digest(self) -> str:
        """A hash of exactly the sensitive sections: trust given to them does not cover changed ones."""
        canonical = json.dumps(self.sections, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def describe(self) -> list[str]:
        """One line per section: what it would do, with its value."""
        lines = []
        for key, value in self.sections.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            if key == "memory.dsn":
                shown = masked_dsn(shown)
            lines.append(f"{key}: {SENSITIVE[key]}: {shown[:2000]}")
        return lines


TrustDecider = Callable[[TrustRequest], bool]


class TrustStore:
    """The folders the user trusted, with the hash of what they trusted.

    Args:
        path: the file (``cortana.config.trust_store()`` puts it beside the user's cortana.yml).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def is_trusted(self, request: TrustRequest) -> bool:
        """Whether the user trusted exactly these sections of this folder."""
        entry = self._entries().get(str(request.folder))
        return isinstance(entry, dict) and entry.get("digest") == request.digest

    def trust(self, request: TrustRequest) -> None:
        """Remember that the user trusts these sections of this folder (replacing what they trusted before)."""
        entries = self._entries()
        entries[str(request.folder)] = {
            "digest": request.digest,
            "sections": sorted(request.sections),
            "at": time.time(),
        }
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, then moved into place
            "w", dir=self.path.parent, prefix=".trusted-", suffix=".json", delete=False, encoding="utf-8"
        )
        try:
            with handle:
                json.dump({"folders": entries}, handle, indent=2, sort_keys=True)
            os.chmod(handle.name, 0o600)
            os.replace(handle.name, self.path)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)
            raise

    def _entries(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot be read ({exc}); delete it to trust folders anew", source=str(self.path)
            ) from None
        folders = data.get("folders") if isinstance(data, dict) else None
        return dict(folders) if isinstance(folders, dict) else {}

"""Workspace trust: a folder's cortana.yml may not run code, widen permissions or send prompts away unasked.

A repository is someone else's text. Its ``cortana.yml`` may set the model
and the temperature, and add to the user's restrictions, but the sections that
would run code, let tools run without asking, loosen one of the user's own
restrictions (``RESTRICTIONS``: an empty deny list where the user has one), or
send the conversation off the machine (``SENSITIVE``) only apply once the user
has trusted the folder. That includes an ``engine`` whose address (from the
user's own environment, such as ``OPENAI_BASE_URL``) is on another machine.
Trust is remembered in the user's Cortana config folder, keyed by the
folder's real path and a hash of exactly those sections and of the files
inside the folder that a trusted command runs (an MCP server's
``sh start.sh``): a changed section or a changed script asks again.
Untrusted, or with no terminal to ask on, those sections are ignored (a
restriction keeps the user's value, with the folder's additions) and one
line says so. The model's file tools cannot write the trust file, and any
write to ``cortana.yml`` or to such a script is asked for every time, so
nothing the model writes can make a folder trusted.

A trusted folder is also one whose git may run the repository's own hooks and
configured programs for the commands the model runs (``cortana.safegit``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import itertools
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cortana.errors import ConfigError

__all__ = [
    "RESTRICTIONS",
    "SENSITIVE",
    "TRUST_FILE",
    "Restriction",
    "Tighter",
    "TrustDecider",
    "TrustRequest",
    "TrustStore",
    "files_digests",
    "is_loopback_url",
    "masked_dsn",
    "sensitive_sections",
    "started_files",
    "untrusted_part_left_out",
    "without_sections",
]

SENSITIVE: dict[str, str] = {
    "mcp.servers": "start MCP servers (run their commands, or connect to their addresses)",
    "permissions.allow": "let these tools run without asking",
    "permissions.deny": "drop tools from your deny list",
    "base_url": "send the conversation to an engine on another machine",
    "engine": "send the conversation to an engine on another machine",
    "models.*": "send the fix's prompts (your code and its failing tests) to an engine on another machine",
    "memory.dsn": "store your conversations in this PostgreSQL database",
    "send_key_over_http": "send the engine's API key unencrypted (plain http) to another machine",
    "serve.cors_origins": "let scripts of these web pages call `cortana serve`",
    "tracing.otlp_endpoint": "send traces of your conversations (timings, and content if asked) to another machine",
    "web.search_url": "send your web searches to this search engine",
    "web.allow_loopback": "let the model's web_fetch read pages served on this machine",
    "test": "run this command as the project's tests (the fix workflow runs it, unasked under --yes)",
    "lint": "run these commands on each file the model writes",
    "hooks": "run these commands at moments of each session (before and after tool calls, each message), each "
    "event's list in place of your own hooks of that event",
    "hooks.*": "stop running your own hooks of this event",
    "sandbox.enabled": "run the commands the model asks for without the kernel's sandbox",
    "sandbox.ask": "run confined commands without asking, though your own cortana.yml asks",
    "sandbox.shell_mode": "run your `!` commands unconfined, though your own cortana.yml confines them",
    "sandbox.writable": "let the model's commands write these folders outside the workspace",
    "sandbox.env.keep": "pass environment variables that look like secrets to the commands Cortana runs",
    "sandbox.env.drop": "pass environment variables your own cortana.yml drops to the commands Cortana runs",
}
"""The cortana.yml keys a workspace needs the user's trust for, and what each would do (``hooks.*``: each event)."""


class Tighter(Enum):
    """Which way a restriction of cortana.yml tightens, and so what of a folder's value loosens yours."""

    MORE = "more entries"
    """A list of restrictions (``permissions.deny``, a hook event): leaving out one of yours loosens."""
    FEWER = "fewer entries"
    """A list of allowances (``permissions.allow``, ``sandbox.writable``): an entry you do not have loosens."""
    TRUE = "true"
    """A switch whose true is stricter (``sandbox.ask``): false where yours is true loosens."""
    FALSE = "false"
    """A switch whose false is stricter (``web.allow_loopback``): true where yours is false loosens."""


@dataclass(frozen=True)
class Restriction:
    """How one restriction of cortana.yml merges a folder's value into yours.

    Attributes:
        tighter: which way it tightens.
        default: your value when your cortana.yml does not set it (the setting's default).
        globs: a list of name globs, matched case-sensitively: a plain name of the folder's that one of your globs
            matches is one you have (your ``allow: ["*"]`` has ``read_file``). A glob of the folder's is only
            yours written the same: whether one glob covers another is not worth guessing at.
    """

    tighter: Tighter
    default: Any
    globs: bool = False

    def loosens(self, theirs: Any, yours: Any) -> bool:
        """Whether the folder's value ``theirs``, applied as written, is looser than ``yours`` anywhere."""
        if self.tighter is Tighter.TRUE:
            return theirs is not True and yours is True
        if self.tighter is Tighter.FALSE:
            return theirs is not False and yours is False
        if not isinstance(theirs, list):
            return True  # not a list: validation refuses it; never take it for a tightening
        if self.tighter is Tighter.MORE:
            return any(entry not in theirs for entry in yours)
        return not all(self._has(yours, entry) for entry in theirs)

    def kept(self, theirs: Any, yours: Any) -> Any:
        """The value that applies untrusted: yours with the folder's additions, or only its narrowing of yours."""
        if self.tighter is Tighter.TRUE:
            return yours is True or theirs is True
        if self.tighter is Tighter.FALSE:
            return yours is True and theirs is True
        theirs = theirs if isinstance(theirs, list) else []
        if self.tighter is Tighter.MORE:
            return [*yours, *(entry for entry in theirs if entry not in yours)]
        return [entry for entry in theirs if self._has(yours, entry)]

    def _has(self, yours: list[Any], entry: Any) -> bool:
        if entry in yours:
            return True
        plain = self.globs and isinstance(entry, str) and not any(character in entry for character in "*?[")
        return plain and any(isinstance(glob, str) and fnmatch.fnmatchcase(entry, glob) for glob in yours)


RESTRICTIONS: dict[str, Restriction] = {
    "permissions.allow": Restriction(Tighter.FEWER, [], globs=True),
    "permissions.deny": Restriction(Tighter.MORE, []),
    "hooks.*": Restriction(Tighter.MORE, []),
    "sandbox.enabled": Restriction(Tighter.TRUE, True),
    "sandbox.ask": Restriction(Tighter.TRUE, False),
    "sandbox.shell_mode": Restriction(Tighter.TRUE, False),
    "sandbox.writable": Restriction(Tighter.FEWER, []),
    "sandbox.env.keep": Restriction(Tighter.FEWER, [], globs=True),
    "sandbox.env.drop": Restriction(Tighter.MORE, []),
    "web.allow_loopback": Restriction(Tighter.FALSE, False),
}
"""The cortana.yml keys that restrict what may happen, and which way each tightens (``hooks.*``: each event).

A workspace's cortana.yml may tighten them as it likes; a value looser than yours (your cortana.yml's, else the
default) needs trust. Untrusted, a list of restrictions applies as yours plus the folder's entries, a list of
allowances as only the folder's entries you also have, a switch as the stricter of the two."""

TRUST_FILE = "trusted-folders.json"


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` points at this machine (127.0.0.0/8, ::1, localhost, or 0.0.0.0, which reaches it too)."""
    try:
        host = urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    except ValueError:  # not a URL at all ("[", "http://[::1"): not this machine, as far as anyone can tell
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def sensitive_sections(data: dict[str, Any], yours: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parts of a workspace's cortana.yml data that need trust (dotted key -> value, in ``SENSITIVE``'s order).

    Those that run something or send something away, whatever their value, and each restriction
    (``RESTRICTIONS``) whose value is looser than yours.

    Args:
        data: what the workspace's cortana.yml sets (its validated values: ``enabled: 0`` is a false).
        yours: what your own cortana.yml sets, the same way; a key it leaves out has its default.
    """
    found: dict[str, Any] = {}
    mcp = data.get("mcp")
    if isinstance(mcp, dict) and mcp.get("servers"):
        found["mcp.servers"] = mcp["servers"]
    base_url = data.get("base_url")
    if base_url and not (isinstance(base_url, str) and is_loopback_url(base_url)):
        found["base_url"] = base_url
    memory = data.get("memory")
    if isinstance(memory, dict) and memory.get("dsn"):
        found["memory.dsn"] = memory["dsn"]
    if data.get("send_key_over_http"):
        found["send_key_over_http"] = data["send_key_over_http"]
    serve = data.get("serve")
    if isinstance(serve, dict) and serve.get("cors_origins"):
        found["serve.cors_origins"] = serve["cors_origins"]
    tracing = data.get("tracing")
    endpoint = tracing.get("otlp_endpoint") if isinstance(tracing, dict) else None
    if endpoint and not (isinstance(endpoint, str) and is_loopback_url(endpoint)):
        found["tracing.otlp_endpoint"] = endpoint
    web = data.get("web")
    search = web.get("search_url") if isinstance(web, dict) else None
    if search and not (isinstance(search, str) and is_loopback_url(search)):
        found["web.search_url"] = search
    if data.get("test"):
        found["test"] = data["test"]
    hooks = data.get("hooks")
    if isinstance(hooks, dict) and any(hooks.values()):
        found["hooks"] = hooks
    lint = data.get("lint")
    if lint and not (isinstance(lint, dict) and not any(str(command).strip() for command in lint.values())):
        found["lint"] = lint  # turning checks off ("*.py": "") runs nothing: no trust needed for that
    for key, restriction, theirs in _restrictions_set(data):
        if key.startswith("hooks.") and "hooks" in found:
            continue  # the folder's own hooks need trust already, and trusting them trusts each event's list
        if restriction.loosens(theirs, _value_at(yours or {}, key, restriction.default)):
            found[key] = theirs
    order = list(SENSITIVE)
    return dict(sorted(found.items(), key=lambda item: order.index(_pattern(item[0]))))


def untrusted_part_left_out(data: dict[str, Any], sections: dict[str, Any], yours: dict[str, Any]) -> dict[str, Any]:
    """``data`` as an untrusted folder's cortana.yml applies: without its ``sections`` that need trust.

    A restriction among them becomes yours with the folder's additions (``Restriction.kept``); every other
    section is left out, so yours applies. ``yours`` is what your own cortana.yml sets.
    """
    kept = data
    for key, theirs in sections.items():
        restriction = _restriction(key)
        if restriction is not None:
            kept = _with_value(kept, key, restriction.kept(theirs, _value_at(yours, key, restriction.default)))
    return without_sections(kept, [key for key in sections if _restriction(key) is None])  # a folder's hooks too


def _pattern(key: str) -> str:
    """The ``SENSITIVE`` / ``RESTRICTIONS`` entry of a dotted key (``hooks.before_tool`` is ``hooks.*``)."""
    parent, _, _ = key.rpartition(".")
    return key if key in SENSITIVE or not parent else f"{parent}.*"


def _restriction(key: str) -> Restriction | None:
    return RESTRICTIONS.get(key) or RESTRICTIONS.get(_pattern(key))


_MISSING = object()


def _value_at(data: dict[str, Any], dotted: str, default: Any = _MISSING) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def _restrictions_set(data: dict[str, Any]) -> list[tuple[str, Restriction, Any]]:
    """Each restriction ``data`` sets (a ``*`` of ``RESTRICTIONS`` named by the key set), with its value."""
    found = []
    for key, restriction in RESTRICTIONS.items():
        parent, _, last = key.rpartition(".")
        if last == "*":
            below = _value_at(data, parent, {})
            named = below.items() if isinstance(below, dict) else []
            found += [(f"{parent}.{name}", restriction, value) for name, value in named]
        elif (value := _value_at(data, key)) is not _MISSING:
            found.append((key, restriction, value))
    return found


def _with_value(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``dotted`` set to ``value`` (each mapping on the way copied, never changed)."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return {**data, head: value}
    below = data.get(head)
    return {**data, head: _with_value(below if isinstance(below, dict) else {}, rest, value)}


MAX_STARTED_FILES = 500
"""The most files of one folder argument that trust hashes (a server started as ``node server/``)."""


def started_files(servers: Any, workspace: Path) -> list[Path]:
    """The files and folders inside ``workspace`` that stdio MCP servers ``servers`` (cortana.yml entries) run.

    A server's program when it is a path (``./serve.sh``), and each argument that names an existing file or
    folder inside the workspace, from the server's ``cwd`` (``sh start.sh``, ``python server.py``,
    ``--config=tools.json``), with ``-m pkg.mod`` found as ``pkg/mod.py`` or ``pkg/mod/``.
    """
    root = workspace.resolve()
    found: dict[Path, None] = {}
    for server in servers if isinstance(servers, list) else []:
        if not isinstance(server, dict) or not isinstance(server.get("command"), str):
            continue
        cwd = server.get("cwd")
        base = (root / cwd).resolve() if isinstance(cwd, str) and cwd else root
        words = [server["command"], *(arg for arg in server.get("args") or [] if isinstance(arg, str))]
        candidates = [word for word in words[1:] if not word.startswith("-")]
        candidates += [word.split("=", 1)[1] for word in words[1:] if word.startswith("-") and "=" in word]
        if "/" in words[0]:
            candidates.append(words[0])
        for flag, module in itertools.pairwise(words):
            if flag == "-m":
                candidates += [module.replace(".", "/") + ".py", module.replace(".", "/")]
        for candidate in candidates:
            try:
                path = (base / os.path.expanduser(candidate)).resolve()
            except (OSError, RuntimeError, ValueError):
                continue
            if path != root and root in path.parents and path.exists():
                found[path] = None
    return list(found)


def files_digests(paths: list[Path], workspace: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of each file, or of every file in each folder (bounded), for a trust request."""
    root = workspace.resolve()
    digests: dict[str, str] = {}
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())[:MAX_STARTED_FILES]
        for file in files:
            try:
                digests[str(file.relative_to(root))] = hashlib.sha256(file.read_bytes()).hexdigest()
            except (OSError, ValueError):
                digests[str(file)] = "unreadable"
    return digests


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
        files: relative path -> SHA-256 of each file inside the folder that those sections run
            (an MCP server's script): trust covers these exact contents.
    """

    folder: Path
    file: Path
    sections: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """A hash of exactly the sensitive sections and the files they run: trust given to them covers no change."""
        trusted: Any = {"sections": self.sections, "files": self.files} if self.files else self.sections
        canonical = json.dumps(trusted, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def describe(self) -> list[str]:
        """One line per section: what it would do, with its value; then one per file it runs."""
        lines = []
        for key, value in self.sections.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            if key == "memory.dsn":
                shown = masked_dsn(shown)
            lines.append(f"{key}: {SENSITIVE[_pattern(key)]}: {shown[:2000]}")
        lines += [f"runs {path} as it is now (sha256 {digest[:12]}…)" for path, digest in sorted(self.files.items())]
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

    def why_not(self, request: TrustRequest) -> str:
        """Why ``request`` is not trusted, for the line that says its sections are ignored."""
        entry = self._entries().get(str(request.folder))
        if not isinstance(entry, dict):
            return "this folder is not trusted"
        recorded = entry.get("files")
        before: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        changed = sorted(path for path, digest in request.files.items() if before.get(path) != digest)
        if changed:
            return f"{', '.join(changed[:3])} changed since you trusted this folder"
        return "its settings changed since you trusted this folder"

    def trust(self, request: TrustRequest) -> None:
        """Remember that the user trusts these sections of this folder (replacing what they trusted before)."""
        entries = self._entries()
        entries[str(request.folder)] = {
            "digest": request.digest,
            "sections": sorted(request.sections),
            "files": dict(request.files),
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

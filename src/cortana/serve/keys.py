"""The bearer key clients of ``cortana serve`` must give.

Made on first start with ``secrets`` (256 bits), stored beside the user's
cortana.yml readable by the owner only (0600), and printed once, when it is
made. A script may bring its own (``--key`` or ``CORTANA_SERVE_KEY``).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cortana.config import SERVE_KEY_VARIABLE, serve_key_variable, user_config_path
from cortana.errors import UserError

__all__ = ["KEY_ENV", "MIN_KEY_LENGTH", "ServeKey", "key_file", "keys_match", "serve_key"]

KEY_ENV = SERVE_KEY_VARIABLE
MIN_KEY_LENGTH = 16
"""The shortest key accepted: a short one is guessed by anyone who can reach the port."""


def key_file() -> Path:
    """Where the generated key is kept: ``serve.key`` beside the user's cortana.yml."""
    return user_config_path().parent / "serve.key"


@dataclass(frozen=True)
class ServeKey:
    """The key, where it came from (``--key``, the variable, or the file), and whether it was just made."""

    key: str
    source: str
    made: bool = False


def serve_key(given: str | None = None, environ: Mapping[str, str] | None = None) -> ServeKey:
    """The key: ``given`` (``--key``), else ``CORTANA_SERVE_KEY``, else the stored one, else a new one (the caller
    prints a new one, once)."""
    from_variable = serve_key_variable(environ)
    chosen = given if given is not None else from_variable
    if chosen is not None:
        source = "--key" if given is not None else KEY_ENV
        chosen = chosen.strip()
        if len(chosen) < MIN_KEY_LENGTH or any(ch.isspace() for ch in chosen):
            raise UserError(
                f"{source}: the serve key must be at least {MIN_KEY_LENGTH} characters with no spaces; "
                f"leave out --key and {KEY_ENV} to have one made for you"
            )
        return ServeKey(chosen, source)
    path = key_file()
    try:
        info = path.stat()
    except FileNotFoundError:
        return ServeKey(_new_key(path), str(path), made=True)
    if stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(0o600)  # readable by others: narrowed (the key may have been seen; remove the file for a new one)
    key = path.read_text(encoding="utf-8").strip()
    if len(key) < MIN_KEY_LENGTH:
        raise UserError(f"{path} does not hold a usable key; delete it and a new one is made")
    return ServeKey(key, str(path))


def _new_key(path: Path) -> str:
    key = "cortana-" + secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(key + "\n")
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return key


def keys_match(given: str, expected: str) -> bool:
    """Whether ``given`` is the key, compared in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))

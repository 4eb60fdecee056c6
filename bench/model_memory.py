"""How much memory the embedded engine takes, against what ``cortana models`` estimates before a download.

For each bundled model and context window: start the embedded engine as ``cortana`` does, answer one short
question (so the weights are read and the buffers used), then read the engine process's peak resident memory
(``VmHWM``). The estimate is
``cortana.models.catalogue.memory_estimate`` from the file's own GGUF header.

    python bench/model_memory.py [--windows 2048,8192,32768]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx

from cortana.models.catalogue import memory_estimate
from cortana.models.embedded import BUNDLED_MODELS, EmbeddedServer, ensure_model_file
from cortana.models.gguf import read_gguf

RESULTS = Path(__file__).resolve().parent / "results" / "model_memory.json"
MIB = 1 << 20


def peak_resident(pid: int) -> int:
    """The process's peak resident memory in bytes (``VmHWM``)."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert found, status
    return int(found.group(1)) * 1024


async def measure(name: str, window: int) -> dict[str, Any]:
    path = ensure_model_file(name)
    server = EmbeddedServer(path, context_window=window)
    url = await server.start()
    try:
        async with httpx.AsyncClient(timeout=300) as client:
            answer = await client.post(
                f"{url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {server.api_key}"},
                json={"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8},
            )
            answer.raise_for_status()
        assert server.pid is not None
        peak = peak_resident(server.pid)
    finally:
        await server.stop()
    estimate = memory_estimate(read_gguf(path), window)
    return {
        "model": name,
        "window": window,
        "measured_peak_mib": round(peak / MIB),
        "estimate_mib": round(estimate.total / MIB),
        "estimate_parts_mib": {part: round(value / MIB) for part, value in estimate.parts().items()},
        "error_percent": round(100 * (estimate.total - peak) / peak, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", default="2048,8192,32768")
    args = parser.parse_args()
    rows = []
    for name in BUNDLED_MODELS:
        for window in (int(part) for part in args.windows.split(",")):
            row = asyncio.run(measure(name, window))
            rows.append(row)
            print(json.dumps(row))
    errors = [abs(row["error_percent"]) for row in rows]
    summary = {
        "rows": rows,
        "mean_abs_error_percent": round(sum(errors) / len(errors), 1),
        "max_abs_error_percent": max(errors),
    }
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"mean |error| {summary['mean_abs_error_percent']}%, max {summary['max_abs_error_percent']}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

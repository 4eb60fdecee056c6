"""What one ``web_fetch`` of a 1 MB page adds to the prompt, in the bundled models' tokens (issue 64).

Four 1 MB pages are served on loopback by Python's ``http.server``: documentation
prose (the rustdoc book's pages, end to end), a code-heavy page (Cortana's own
source in ``<pre>`` blocks), JSON and a plain-text log. For each, the model's
call and ``web_fetch``'s result are added to a one-question conversation, and the
prompt is counted with the engine's own chat template and tokenizer
(``count_tokens``) before and after; the goal is at most 2,000 tokens. The time
of the fetch (download, extraction) is reported too.

    python bench/web_fetch.py [--model qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from cortana.messages import Message, ToolCall
from cortana.tools.builtin.web import WebPolicy, web_tools
from report import RESULTS, save, table

SIZE = 1_000_000
ROOT = Path(__file__).resolve().parents[1]


def pages(folder: Path) -> dict[str, Path]:
    """The four pages, each about 1 MB."""
    rustdoc = sorted(Path.home().glob(".rustup/toolchains/*/share/doc/rust/html/rustdoc/*.html"))
    prose = "".join(path.read_text(errors="replace") for path in rustdoc) or (
        "<p>" + "Documentation prose about configuring a tool, its options and their defaults. " * 40 + "</p>"
    )
    body = ""
    while len(body) < SIZE:
        body += prose
    sources = sorted((ROOT / "src" / "cortana").rglob("*.py"))
    code = "<html><head><title>Source</title></head><body><h1>Source listing</h1>"
    for path in sources:
        code += f"<h2>{path.name}</h2><pre><code>{html.escape(path.read_text())}</code></pre>"
        if len(code) > SIZE:
            break
    items = [{"id": i, "name": f"widget-{i}", "tags": ["a", "b"], "price": i * 1.5} for i in range(20_000)]
    log = "".join(f"2026-12-06 10:{i % 60:02d}:00 INFO worker {i % 7} handled request {i} in {i % 97} ms\n"
                  for i in range(20_000))  # fmt: skip
    written = {
        "prose.html": body[:SIZE],
        "code.html": code[:SIZE],
        "data.json": json.dumps(items)[:SIZE],
        "server.log": log[:SIZE],
    }
    for name, text in written.items():
        (folder / name).write_text(text)
    return {name: folder / name for name in written}


async def measure(model: str) -> dict[str, Any]:
    from cortana.models.factory import create_model_client

    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        served = pages(folder)
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        client = await create_model_client("embedded", model=model, threads=2)
        [fetch] = web_tools(WebPolicy(allow_loopback=True))
        question = [Message.system("You are a helpful assistant."), Message.user("What does this page say?")]
        rows = {}
        try:
            before = await client.count_tokens(question, [fetch.spec])
            for name, path in served.items():
                url = f"{base}/{name}"
                started = time.perf_counter()
                result = await fetch.function(url=url)
                seconds = time.perf_counter() - started
                call = ToolCall(id="c1", name="web_fetch", arguments={"url": url})
                turn = [*question, Message.assistant("", tool_calls=[call]), Message.tool(call, result)]
                after = await client.count_tokens(turn, [fetch.spec])
                rows[name] = {
                    "page bytes": path.stat().st_size,
                    "result characters": len(result),
                    "tokens added": after - before,
                    "fetch seconds": round(seconds, 2),
                }
        finally:
            await client.aclose()
            server.shutdown()
    return {"model": model, "goal": "at most 2,000 tokens added", "pages": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()
    result = asyncio.run(measure(args.model))
    table(
        ["page", "bytes", "result chars", "tokens added", "fetch s"],
        [[name, *map(str, cells.values())] for name, cells in result["pages"].items()],
    )
    save(RESULTS / "web_fetch.json", result)


if __name__ == "__main__":
    main()

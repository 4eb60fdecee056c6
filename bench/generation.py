"""Generation speed on CPU: the 1.5B model alone, and with the 0.5B model drafting for it (speculative decoding).

The two bundled models share a tokenizer, so the 0.5B can propose tokens the
1.5B verifies in one batch (llama.cpp's draft-model speculative decoding, set
through xllamacpp's ``CommonParams.speculative``). Each configuration runs in
its own process, a llama.cpp server on 1 thread (the embedded engine's default
on 2 cores), on a code answer and a prose answer at temperature 0, and reports
llama.cpp's own timings: tokens/s generating and reading the prompt, and how
many drafted tokens were accepted. A configuration is worth turning on only if
it wins by at least 1.3x (issue 16).

The second question is how many threads read the prompt (``threads_batch``):
generating stays on 1 thread (on 2 cores, 2 generating threads collapse), but
reading a prompt is one large batch that a second thread may speed up. The
"long" prompt (~1,000 tokens, like the assistant's first request) measures that.

On 2 cores a second thread only helps while the other core is free, so
``--busy`` measures again with a process spinning on one core meanwhile (another
program, a build, a second model).

    python bench/generation.py                       # every configuration
    python bench/generation.py --only "1.5B alone" --only "1.5B, 2 threads reading" [--busy]

``--samples`` measures what the fix workflow's samples get instead, on each bundled model, through the
embedded engine as the workflow runs it: a prompt that asks for a function written again (a real one, from
``bench/tasks/``), answered four times at temperature 0.8, as it was (one slot, four requests one after the
other, the prompt cached after the first), in one request of four completions decoded together in four slots,
and with n-gram speculation on top; and one greedy answer with and without speculation, for llama.cpp's count
of drafted and accepted tokens. Reported: tokens written per second, samples per minute.

    python bench/generation.py --samples
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from report import save

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = {
    "code": "Write a Python function that parses an ISO 8601 date string and returns a datetime, with a docstring.",
    "prose": "Explain in two short paragraphs why the sky is blue.",
    "long": "Say in one sentence what this module is for.\n\n"
    + (ROOT / "src" / "cortana" / "models" / "guided.py").read_text()[:4200],
}
CONFIGS: dict[str, dict[str, int]] = {
    "1.5B alone": {"draft": 0, "batch_threads": 1},
    "draft 0.5B, up to 3 tokens": {"draft": 3, "batch_threads": 1},
    "draft 0.5B, up to 8": {"draft": 8, "batch_threads": 1},
    "1.5B, 2 threads reading": {"draft": 0, "batch_threads": 2},
}

CHILD = """
import json, sys, httpx
import xllamacpp as xlc
from cortana.models.embedded import resolve_model_path
draft, batch_threads = int(sys.argv[1]), int(sys.argv[3])
_, big = resolve_model_path("qwen2.5-coder-1.5b")
p = xlc.CommonParams()
p.model.path = str(big); p.hostnames = ["127.0.0.1"]; p.port = 0; p.n_ctx = 4096; p.n_parallel = 1
p.cpuparams.n_threads = 1; p.cpuparams_batch.n_threads = batch_threads
p.n_gpu_layers = 0; p.use_jinja = True; p.warmup = False
if draft:
    _, small = resolve_model_path("qwen2.5-coder-0.5b")
    p.speculative.draft.mparams.path = str(small)
    p.speculative.types = [xlc.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    p.speculative.draft.n_max = draft
    p.speculative.draft.n_min = 0
    p.speculative.draft.cpuparams.n_threads = 1
    p.speculative.draft.cpuparams_batch.n_threads = 1
    p.speculative.draft.n_gpu_layers = 0
server = xlc.Server(p)
url = server.listening_address if server.listening_address.startswith("http") else "http://" + server.listening_address
rows = {}
for name, question in json.loads(sys.argv[2]).items():
    most = 32 if name == "long" else 160
    body = {"messages": [{"role": "user", "content": question}], "max_tokens": most, "temperature": 0, "seed": 1}
    timings = httpx.post(url + "/v1/chat/completions", json=body, timeout=900).json().get("timings", {})
    rows[name] = {key: timings.get(key) for key in (
        "predicted_per_second", "prompt_per_second", "prompt_n", "predicted_n", "draft_n", "draft_n_accepted")}
print(json.dumps(rows))
"""


def measure(draft: int, batch_threads: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(draft), json.dumps(PROMPTS), str(batch_threads)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    rows: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


REWRITE_FILE = Path(__file__).parent / "tasks" / "cli-ignore-case" / "findtext" / "cli.py"
"""The module whose ``main`` the samples write again (a parser and its use: most of it is copied)."""
SAMPLE_SETUPS: dict[str, dict[str, Any]] = {
    "1 slot, 4 requests (before)": {"samples": 1, "speculation": "none", "together": False},
    "4 slots, 1 request of 4": {"samples": 4, "speculation": "none", "together": True},
    "4 slots, 1 request of 4, n-gram (now)": {"samples": 4, "speculation": "ngram-simple", "together": True},
}


def rewrite_prompt() -> list[dict[str, str]]:
    """The workflow's kind of prompt: a module's code, and one of its functions asked for again, whole."""
    ask = (
        f"File findtext/cli.py:\n```python\n{REWRITE_FILE.read_text()}```\n\nAdd an -i/--ignore-case option. "
        "Write the function main again, whole. Write only that function, as it should read in the file."
    )
    return [{"role": "system", "content": "You change Python code."}, {"role": "user", "content": ask}]


async def sample_rates(model: str) -> dict[str, Any]:
    """Each of :data:`SAMPLE_SETUPS` on ``model``, and one greedy answer with and without speculation."""
    import time

    from cortana.messages import Message
    from cortana.models.base import ModelRequest, ModelSettings, complete
    from cortana.models.embedded import EmbeddedClient

    messages = [Message.system(m["content"]) if m["role"] == "system" else Message.user(m["content"])
                for m in rewrite_prompt()]  # fmt: skip
    rows: dict[str, Any] = {}
    for label, setup in SAMPLE_SETUPS.items():
        async with await EmbeddedClient.start(model, samples=setup["samples"], speculation=setup["speculation"]) as c:
            warm = ModelRequest(messages, [], ModelSettings(temperature=0.0, max_tokens=1))
            await complete(c, warm)  # the prompt read once, as the workflow's first sample reads it
            settings = ModelSettings(temperature=0.8, seed=7, max_tokens=400)
            started = time.perf_counter()
            request = ModelRequest(messages, [], settings)
            if setup["together"]:
                answers = await c.complete_many(request, 4)
            else:
                answers = [await complete(c, ModelRequest(messages, [], ModelSettings(
                    temperature=0.8, seed=7 + n, max_tokens=400))) for n in range(4)]  # fmt: skip
            took = time.perf_counter() - started
        written = sum(len(answer.message.content) for answer in answers)
        tokens = sum(answer.usage.completion_tokens for answer in answers)
        rows[label] = {"seconds": round(took, 1), "tokens": tokens, "characters": written,
                       "tokens_per_second": round(tokens / took, 1) if tokens else None,
                       "samples_per_minute": round(4 * 60 / took, 1)}  # fmt: skip
        print(
            f"{model} {label:<52} {took:6.1f}s  {rows[label]['samples_per_minute']:5.1f} samples/min  "
            f"{rows[label]['tokens_per_second']} tok/s ({tokens} tokens)",
            flush=True,
        )
    for speculation in ("none", "ngram-simple"):
        async with await EmbeddedClient.start(model, samples=1, speculation=speculation) as c:
            body = {"messages": rewrite_prompt(), "max_tokens": 400, "temperature": 0, "seed": 1, "stream": False}
            data = await c.http.request_json("POST", "/v1/chat/completions", json_body=body)
        timings = data.get("timings") or {}
        rows[f"greedy, speculation {speculation}"] = {key: timings.get(key) for key in (
            "predicted_per_second", "predicted_n", "draft_n", "draft_n_accepted")}  # fmt: skip
        print(
            f"{model} greedy, speculation {speculation:<13} {timings.get('predicted_per_second', 0):6.1f} tok/s, "
            f"accepted {timings.get('draft_n_accepted')}/{timings.get('draft_n')}",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=list(CONFIGS), help="only this configuration")
    parser.add_argument("--busy", action="store_true", help="with a process spinning on one core meanwhile")
    parser.add_argument("--samples", action="store_true", help="the fix workflow's samples, on each bundled model")
    args = parser.parse_args()
    if args.samples:
        import asyncio

        from cortana.models.embedded import installed_models

        found = {model: asyncio.run(sample_rates(model)) for model in reversed(installed_models())}
        save(Path(__file__).parent / "results" / "generation_samples.json", found)
        return
    chosen = args.only or list(CONFIGS)
    if "1.5B alone" not in chosen:
        chosen.insert(0, "1.5B alone")  # the baseline every speedup is against
    results: dict[str, Any] = {}
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        for label in chosen:
            results[label] = measure(**CONFIGS[label])
            for prompt, row in results[label].items():
                print(f"{label:<28} {prompt:<6} {row['predicted_per_second']:6.2f} tok/s generating, "
                      f"{row['prompt_per_second']:6.1f} reading ({row['prompt_n']}), {row['predicted_n']} tokens, "
                      f"accepted {row['draft_n_accepted']}/{row['draft_n']}", flush=True)  # fmt: skip
    finally:
        if spinner is not None:
            spinner.kill()
    alone = results["1.5B alone"]
    for label in chosen:
        results[label]["speedup"] = {
            f"{prompt} {kind}": round(results[label][prompt][key] / alone[prompt][key], 2)
            for prompt in PROMPTS
            for kind, key in (("generating", "predicted_per_second"), ("reading", "prompt_per_second"))
        }
    name = "generation" if args.only is None else "generation_" + re.sub(r"[^A-Za-z0-9.]+", "-", "_".join(chosen))
    save(Path(__file__).parent / "results" / f"{name}{'_busy' if args.busy else ''}.json", results)


if __name__ == "__main__":
    main()

"""Generation speed on CPU: the 1.5B model alone, and with the 0.5B model drafting for it (speculative decoding).

The two bundled models share a tokenizer, so the 0.5B can propose tokens the
1.5B verifies in one batch (llama.cpp's draft-model speculative decoding, set
through xllamacpp's ``CommonParams.speculative``). Each configuration runs in
its own process, a llama.cpp server on 1 thread (the embedded engine's default
on 2 cores), on a code answer and a prose answer at temperature 0, and reports
llama.cpp's own timings: tokens/s generating and reading the prompt, and how
many drafted tokens were accepted. A configuration is worth turning on only if
it wins by at least 1.3x (issue 16).

    python bench/generation.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from report import save

PROMPTS = {
    "code": "Write a Python function that parses an ISO 8601 date string and returns a datetime, with a docstring.",
    "prose": "Explain in two short paragraphs why the sky is blue.",
}
CONFIGS: dict[str, int | None] = {"1.5B alone": None, "draft 0.5B, up to 3 tokens": 3, "draft 0.5B, up to 8": 8}

CHILD = """
import json, sys, httpx
import xllamacpp as xlc
from cortana.models.embedded import resolve_model_path
draft = int(sys.argv[1])
_, big = resolve_model_path("qwen2.5-coder-1.5b")
p = xlc.CommonParams()
p.model.path = str(big); p.hostnames = ["127.0.0.1"]; p.port = 0; p.n_ctx = 4096; p.n_parallel = 1
p.cpuparams.n_threads = 1; p.cpuparams_batch.n_threads = 1; p.n_gpu_layers = 0; p.use_jinja = True; p.warmup = False
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
    body = {"messages": [{"role": "user", "content": question}], "max_tokens": 160, "temperature": 0, "seed": 1}
    timings = httpx.post(url + "/v1/chat/completions", json=body, timeout=900).json().get("timings", {})
    rows[name] = {key: timings.get(key) for key in (
        "predicted_per_second", "prompt_per_second", "predicted_n", "draft_n", "draft_n_accepted")}
print(json.dumps(rows))
"""


def measure(draft: int | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(draft or 0), json.dumps(PROMPTS)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    rows: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def main() -> None:
    results: dict[str, Any] = {}
    for label, draft in CONFIGS.items():
        results[label] = measure(draft)
        for prompt, row in results[label].items():
            print(f"{label:<28} {prompt:<6} {row['predicted_per_second']:6.2f} tok/s generating, "
                  f"{row['prompt_per_second']:6.1f} reading, {row['predicted_n']} tokens, "
                  f"accepted {row['draft_n_accepted']}/{row['draft_n']}", flush=True)  # fmt: skip
    alone = results["1.5B alone"]
    for label in CONFIGS:
        results[label]["speedup"] = {
            prompt: round(results[label][prompt]["predicted_per_second"] / alone[prompt]["predicted_per_second"], 2)
            for prompt in PROMPTS
        }
    save(Path(__file__).parent / "results" / "generation.json", results)


if __name__ == "__main__":
    main()

"""Tool-call success of small local models, with and without Cortana's text recovery.

Offline (default): scores the real outputs recorded from Qwen2.5-Coder 0.5B
and 1.5B on llama.cpp (tests/fixtures/toolcalls/outputs.jsonl: 24 prompts a
tool fits, 12 it does not, two system prompts) as each Cortana setting would
see them: no recovery (structured ``tool_calls`` only), text recovery, and
recovery plus the grounding check.

Live (``--live``): runs the same prompts through ``Agent.run`` on the
embedded engine with stub tools, end to end (the tool must run with the
right arguments and the run must end with a text answer).

    python bench/toolcalls.py
    python bench/toolcalls.py --live --model qwen2.5-coder-0.5b [--limit 12]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cortana.agent.grounding import conversation_evidence, is_grounded
from cortana.messages import Message, ToolCall
from cortana.models.base import ToolSpec
from cortana.models.toolparse import recover_tool_calls
from cortana.tools import SchemaTool
from report import save

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "toolcalls"


def load_tools() -> list[dict[str, Any]]:
    return json.loads((RECORDED / "tools.json").read_text())


def specs(tools: list[dict[str, Any]]) -> list[ToolSpec]:
    return [ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"]) for t in tools]


def _norm(value: object) -> str:
    return " ".join(re.findall(r"[a-z0-9@._/\-]+", str(value).lower()))


def matches(call: ToolCall, expected: dict[str, Any]) -> bool:
    """Right tool, and each expected argument equal (numbers) or one string containing the other."""
    if call.name != expected["name"]:
        return False
    for key, want in expected["arguments"].items():
        got = call.arguments.get(key)
        if isinstance(want, str):
            if not isinstance(got, str) or not (_norm(want) in _norm(got) or _norm(got) in _norm(want)):
                return False
        else:
            try:
                if float(got) != float(want):  # type: ignore[arg-type]
                    return False
            except (TypeError, ValueError):
                return False
    return True


def offered_tools(tools: list[dict[str, Any]]) -> dict[str, SchemaTool]:
    """``SchemaTool`` s with the recorded schemas, for the grounding check."""
    return {
        t["function"]["name"]: SchemaTool(
            t["function"]["name"], t["function"]["description"], t["function"]["parameters"], lambda **_: "ok"
        )
        for t in tools
    }


def score_recorded() -> dict[str, dict[str, Any]]:
    tools = load_tools()
    offered, by_name = specs(tools), offered_tools(tools)
    table: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    for line in (RECORDED / "outputs.jsonl").read_text().splitlines():
        row = json.loads(line)
        key = f"{row['model']} / {row['system']}"
        expected = row["expected"]["tools"]
        content = row["content"] or ""
        structured = [
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=json.loads(c["function"]["arguments"] or "{}"))
            for c in row.get("tool_calls") or []
        ]
        remaining, recovered = recover_tool_calls(content, offered)
        evidence = conversation_evidence([Message.user(row["prompt"]), Message.assistant(remaining)])
        grounded = [c for c in recovered if is_grounded(c, by_name[c.name], evidence)]
        settings = {
            "no recovery": structured,
            "recovery": structured or recovered,
            "recovery + grounding": structured or grounded,
        }
        stats = table[key]
        if expected:
            stats["tool prompts"] += 1
            for name, calls in settings.items():
                stats[f"right call: {name}"] += any(matches(c, expected[0]) for c in calls)
        else:
            stats["no-tool prompts"] += 1
            for name, calls in settings.items():
                stats[f"false call: {name}"] += bool(calls)
    return {key: dict(value) for key, value in table.items()}


async def run_live(model: str, limit: int | None, recover: bool) -> dict[str, Any]:
    from cortana import Agent
    from cortana.models.base import ModelSettings
    from cortana.models.factory import create_model_client

    tools = load_tools()
    prompts: dict[str, dict[str, Any]] = {}
    for line in (RECORDED / "outputs.jsonl").read_text().splitlines():
        row = json.loads(line)
        prompts.setdefault(row["prompt_id"], row)
    chosen = list(prompts.values())[:limit] if limit else list(prompts.values())
    client = await create_model_client("embedded", model=model, threads=1, recover_text_tool_calls=recover)
    calls: list[ToolCall] = []

    def stub(name: str) -> SchemaTool:
        function = next(t["function"] for t in tools if t["function"]["name"] == name)

        def run(**arguments: Any) -> str:
            calls.append(ToolCall(id="x", name=name, arguments=arguments))
            return f"{name} result: ok (42)"

        return SchemaTool(name, function["description"], function["parameters"], run)

    agent_tools = [stub(t["function"]["name"]) for t in tools]
    results = {"tool ok": 0, "tool prompts": 0, "false calls": 0, "no-tool prompts": 0, "answered": 0, "seconds": 0.0}
    try:
        for row in chosen:
            calls.clear()
            agent = Agent(
                client,
                instructions="You are a helpful assistant.",
                tools=agent_tools,
                settings=ModelSettings(temperature=0, seed=42, max_tokens=256),
                max_tool_iterations=4,
            )
            started = time.perf_counter()
            try:
                result = await agent.run(row["prompt"])
                results["answered"] += bool(result.output.strip())
            except Exception as exc:
                print(f"  {row['prompt_id']}: {type(exc).__name__}: {exc}", file=sys.stderr)
            results["seconds"] += time.perf_counter() - started
            expected = row["expected"]["tools"]
            if expected:
                results["tool prompts"] += 1
                results["tool ok"] += any(matches(c, expected[0]) for c in calls)
            else:
                results["no-tool prompts"] += 1
                results["false calls"] += bool(calls)
            print(f"  {row['prompt_id']}: calls={[(c.name, c.arguments) for c in calls]}", file=sys.stderr)
    finally:
        await client.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", action="store_true", help="run the prompts on the embedded engine")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "toolcalls.json")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if args.live:
        for recover in (False, True):
            label = f"{args.model} live, recovery {'on' if recover else 'off'}"
            report[label] = asyncio.run(run_live(args.model, args.limit, recover))
            print(label, report[label])
        args.json = args.json.with_name(f"toolcalls_live_{args.model}.json")
    else:
        report["recorded"] = score_recorded()
        for key, stats in report["recorded"].items():
            print(key)
            for name, value in stats.items():
                print(f"  {name:<36} {value}")
    save(args.json, report)


if __name__ == "__main__":
    main()

"""What the built-in tools cost the assistant's prompt, in tokens, and whether the model still calls them right.

Two measurements on the embedded engine (issue 16, part 3):

- **Prompt tokens**, counted by the engine itself (its chat template through
  ``/apply-template``, then ``/tokenize``): the assistant's first request
  (its instructions and the six built-in tools), and each tool's share (the
  prompt with every tool minus the prompt without that one), with its
  description and each argument's schema tokenized alone.
- **Right calls**, live: the cases in ``bench/builtin_toolcall_set/`` (reading,
  searching, listing, writing and editing files, running commands, and
  questions no tool is for) run through ``Agent`` built as ``cortana`` builds
  it (its instructions, the real built-in tools in a folder made from
  ``workspace.json``, the guided calls of the embedded engine, temperature 0).
  The first tool round is scored: a case is right when the loop runs at least
  one call and every call it runs is one the case accepts (tool and key
  arguments; reading a file before editing it counts); a no-tool case is right
  when nothing runs. Writes and commands are refused, as with no one to approve
  them, so nothing changes; an answer that has written 400 characters of prose
  is stopped there and counts as no call. Each case is in the **development**
  or **held-out** half, fixed by a hash of its id within its tool; cuts are
  decided on the development half only, both are reported.

    python bench/tool_prompt.py --label before                     # Qwen2.5-Coder 1.5B
    python bench/tool_prompt.py --label before --model qwen2.5-coder-0.5b
    python bench/tool_prompt.py --tokens-only
    python bench/tool_prompt.py --label judge --judge                # with the tool judge (issue 44)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from cortana.agent.agent import Agent
from cortana.agent.events import ModelCallFinished, ModelCallStarted, RunFinished, TextDelta, ToolCallStarted
from cortana.assistant import assistant_instructions
from cortana.config import Settings
from cortana.errors import ToolError
from cortana.messages import Message, ToolCall
from cortana.models.base import ModelSettings
from cortana.models.embedded import EmbeddedClient
from cortana.tools import Tool
from cortana.tools.builtin import builtin_tools, workspace_gate
from report import RESULTS, save, table

SET = Path(__file__).resolve().parent / "builtin_toolcall_set"
MAX_PROSE_CHARS = 400
"""An answer this far into prose is stopped: it is not going to call a tool (and the 1.5B model writes slowly)."""


# -- the set ---------------------------------------------------------------------------------------


def load_cases() -> list[dict[str, Any]]:
    """The cases, each with its ``split``: every second id in hash order within its tool is held out."""
    cases = [json.loads(line) for line in (SET / "cases.jsonl").read_text().splitlines() if line.strip()]
    held_out: set[str] = set()
    for category in sorted({case["category"] for case in cases}):
        ids = sorted((c["id"] for c in cases if c["category"] == category), key=_digest)
        held_out.update(ids[1::2])
    return [case | {"split": "held-out" if case["id"] in held_out else "dev"} for case in cases]


def _digest(case_id: str) -> str:
    return hashlib.sha256(case_id.encode()).hexdigest()


def make_workspace(folder: Path) -> Path:
    """The files of ``workspace.json`` under ``folder``."""
    for name, text in json.loads((SET / "workspace.json").read_text()).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


# -- scoring ---------------------------------------------------------------------------------------


def _norm(value: object) -> str:
    text = " ".join(str(value).lower().split())
    return re.sub(r"(^|\s)\./", r"\1", text).rstrip("/")


def value_matches(got: Any, want: Any) -> bool:
    """Strings: ``want`` appears in ``got`` (case and spacing aside); numbers: equal; ``one_of``: any.

    ``None``: left out or null (``read_file`` of a whole file must not stop at a line).
    """
    if want is None:
        return got is None
    if isinstance(want, dict) and "one_of" in want:
        return any(value_matches(got, option) for option in want["one_of"])
    if isinstance(want, (int, float)):  # bool too
        return got == want
    return isinstance(got, str) and _norm(want) in _norm(got)


def call_matches(call: ToolCall, accepted: dict[str, Any]) -> bool:
    return call.name == accepted["name"] and all(
        (key in call.arguments or want is None) and value_matches(call.arguments.get(key), want)
        for key, want in accepted["arguments"].items()
    )


def is_right(case: dict[str, Any], calls: list[ToolCall]) -> bool:
    if not case["expected"]:
        return not calls
    return bool(calls) and all(any(call_matches(call, want) for want in case["expected"]) for call in calls)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per half: right cases, right calls where a tool fits, false calls where none does."""
    result: dict[str, Any] = {}
    for split in ("dev", "held-out", "all"):
        chosen = [row for row in rows if split in ("all", row["split"])]
        tool = [row for row in chosen if row["category"] != "none"]
        none = [row for row in chosen if row["category"] == "none"]
        result[split] = {
            "right": sum(row["right"] for row in chosen),
            "n": len(chosen),
            "right calls": sum(row["right"] for row in tool),
            "tool cases": len(tool),
            "false calls": sum(not row["right"] for row in none),
            "no-tool cases": len(none),
        }
    return result


# -- prompt tokens ---------------------------------------------------------------------------------


async def tokens(client: EmbeddedClient, text: str) -> int:
    answer = await client.http.request_json("POST", "/tokenize", json_body={"content": text})
    return len(answer["tokens"])


async def prompt_tokens(client: EmbeddedClient, instructions: str, tools: list[Tool]) -> dict[str, Any]:
    """The first request's prompt (system prompt and tools), and each tool's share of it."""
    system = [Message.system(instructions)]
    specs = [tool.spec for tool in tools]
    total = await client.count_tokens(system, specs)
    bare = await client.count_tokens(system, None)
    per_tool: dict[str, Any] = {}
    for index, spec in enumerate(specs):
        without = await client.count_tokens(system, specs[:index] + specs[index + 1 :])
        per_tool[spec.name] = {
            "tokens": total - without,
            "description": await tokens(client, spec.description),
            "arguments": {
                name: await tokens(client, json.dumps(schema))
                for name, schema in spec.parameters.get("properties", {}).items()
            },
        }
    return {"system + tools": total, "system": bare, "tools": total - bare, "per tool": per_tool}


# -- the live run ----------------------------------------------------------------------------------


def assistant_agent(client: EmbeddedClient, workspace: Path, tools: list[Tool], judge: bool = False) -> Agent:
    """The agent as ``cortana`` assembles it (``cli/session.py``), without memory and per-turn context.

    ``judge``: with the tool judge (``agent.tool_judge``, on in ``cortana``; off by default here, as these
    cases were first measured without it).
    """
    from cortana.agent.judge import ToolJudge

    settings = Settings()
    return Agent(
        client,
        name="cortana",
        instructions=assistant_instructions(workspace),
        tools=tools,
        permissions=workspace_gate(workspace, approve=None),
        **settings.loop_options(),
        tool_judge=ToolJudge() if judge else None,
        settings=ModelSettings(temperature=0, seed=42, max_tokens=settings.max_tokens),
    )


async def first_round(agent: Agent, prompt: str) -> tuple[list[ToolCall], int, str]:
    """The calls the loop runs after the first model call, that call's prompt tokens, and its text."""
    calls: list[ToolCall] = []
    prompt_tokens, text = 0, ""
    events = agent.run_stream(prompt, unattended=True)  # writes and commands are refused: nothing changes
    try:
        async for event in events:
            if (isinstance(event, ModelCallStarted) and event.iteration > 0) or isinstance(event, RunFinished):
                break
            if isinstance(event, ToolCallStarted):
                calls.append(event.call)
            elif isinstance(event, TextDelta):
                text += event.text
                if len(text) > MAX_PROSE_CHARS:
                    break
            elif isinstance(event, ModelCallFinished):
                prompt_tokens = event.response.usage.prompt_tokens
    finally:
        await events.aclose()
    return calls, prompt_tokens, text


def valid(call: ToolCall, tools: dict[str, Tool]) -> bool:
    """The loop would run it: an offered tool, and arguments that validate."""
    tool = tools.get(call.name)
    if tool is None:
        return False
    try:
        tool.validate(call.arguments)
    except ToolError:
        return False
    return True


async def run_cases(
    client: EmbeddedClient, workspace: Path, tools: list[Tool], cases: list[dict[str, Any]], judge: bool = False
) -> list[dict[str, Any]]:
    agent = assistant_agent(client, workspace, tools, judge)
    by_name = {tool.name: tool for tool in tools}
    rows = []
    for case in cases:
        started = time.perf_counter()
        calls, used, text = await first_round(agent, case["prompt"])
        ran = [call for call in calls if valid(call, by_name)]
        right = is_right(case, ran) and len(ran) == len(calls)
        rows.append(
            {
                "id": case["id"],
                "split": case["split"],
                "category": case["category"],
                "right": right,
                "calls": [{"name": call.name, "arguments": call.arguments} for call in calls],
                "text": text[:200],
                "prompt_tokens": used,
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
        shown = ", ".join(f"{c.name}({json.dumps(c.arguments)[:80]})" for c in calls) or repr(text[:60])
        print(f"  {'ok  ' if right else 'MISS'} {case['split']:<8} {case['id']:<24} {shown}", flush=True)
    return rows


async def measure(model: str, only: str | None, limit: int | None, live: bool, judge: bool = False) -> dict[str, Any]:
    cases = [case for case in load_cases() if only in (None, case["split"])][:limit]
    client = await EmbeddedClient.start(model, threads=1)
    try:
        with tempfile.TemporaryDirectory() as folder:
            workspace = make_workspace(Path(folder))
            tools = builtin_tools(workspace, command_timeout=Settings().tools.command_timeout)
            result: dict[str, Any] = {"model": model, "tool judge": judge}
            result["prompt tokens"] = await prompt_tokens(client, assistant_instructions(workspace), tools)
            result["tools"] = [tool.spec.as_function() for tool in tools]
            if live:
                rows = await run_cases(client, workspace, tools, cases, judge)
                result["score"] = summary(rows)
                result["cases"] = rows
            return result
    finally:
        await client.aclose()


def rescore(path: Path) -> dict[str, Any]:
    """A saved result scored again with the cases as they are now (the calls are kept in it)."""
    result: dict[str, Any] = json.loads(path.read_text())
    result.pop("machine", None)
    cases = {case["id"]: case for case in load_cases()}
    with tempfile.TemporaryDirectory() as folder:
        by_name = {tool.name: tool for tool in builtin_tools(Path(folder))}
        for row in result["cases"]:
            calls = [ToolCall(id="x", name=c["name"], arguments=c["arguments"]) for c in row["calls"]]
            ran = [call for call in calls if valid(call, by_name)]
            row["right"] = is_right(cases[row["id"]], ran) and len(ran) == len(calls)
    result["score"] = summary(result["cases"])
    return result


def report(result: dict[str, Any]) -> None:
    counted = result["prompt tokens"]
    print(
        f"\n{result['model']}: first request {counted['system + tools']} tokens "
        f"(system prompt {counted['system']}, tools {counted['tools']})"
    )
    rows = [
        [name, tool["tokens"], tool["description"], ", ".join(f"{k} {v}" for k, v in tool["arguments"].items())]
        for name, tool in counted["per tool"].items()
    ]
    table(["tool", "tokens", "description", "arguments (schema tokens)"], rows)
    if "score" in result:
        print()
        table(
            ["half", "right", "right calls", "false calls"],
            [
                [
                    split,
                    f"{cell['right']}/{cell['n']}",
                    f"{cell['right calls']}/{cell['tool cases']}",
                    f"{cell['false calls']}/{cell['no-tool cases']}",
                ]
                for split, cell in result["score"].items()
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--label", default="current", help="names the result file: tool_prompt_LABEL_MODEL.json")
    parser.add_argument("--split", choices=("dev", "held-out"), help="run one half only")
    parser.add_argument("--limit", type=int, help="run the first N cases only")
    parser.add_argument("--tokens-only", action="store_true", help="count prompt tokens; no live cases")
    parser.add_argument("--rescore", type=Path, help="score a saved result again with the current cases")
    parser.add_argument("--judge", action="store_true", help="with the tool judge, as cortana runs (issue 44)")
    args = parser.parse_args()
    if args.rescore:
        result = rescore(args.rescore)
        report(result)
        save(args.rescore, result)
        return
    result = asyncio.run(measure(args.model, args.split, args.limit, live=not args.tokens_only, judge=args.judge))
    result["label"] = args.label
    report(result)
    suffix = "_tokens" if args.tokens_only else ""
    save(RESULTS / f"tool_prompt_{args.label}_{args.model}{suffix}.json", result)


if __name__ == "__main__":
    main()

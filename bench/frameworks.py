"""The same agent in every framework: one adapter each, built the way that framework's docs build it.

Every adapter builds an agent with the same instructions and the same tools,
pointed at the same OpenAI-compatible server and model name, with each
framework's defaults except where a default would reach the internet or print
to the terminal (OpenAI Agents SDK tracing, agno telemetry, smolagents'
console log): those are turned off, as a local user would have them.

The tools are written once, as plain functions (``PLAIN_TOOLS``), and each
adapter wraps them once, before anything is measured, in its framework's own
form (``tool()``, ``function_tool()``, or the plain function), so building an
agent measures the agent, not the tool decorator; agno's own comparisons do
the same.

A framework that is not installed is skipped (``available()`` says which);
the peers come from ``bench/requirements.txt``, never from cortana's own
dependencies.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from scripted_server import ANSWER, MARKER

INSTRUCTIONS = "You are a helpful assistant. Use the tools when they help."
PROMPT = "What is the weather in Tokyo?"
PARALLEL_PROMPT = "Look up keys a, b, c and d."
MODEL = "bench"
TOOL_SECONDS = 0.2

os.environ.setdefault("AGNO_TELEMETRY", "false")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("OPENAI_API_KEY", "not-needed")  # some SDKs refuse to start without one


def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city name.
    """
    return f"The weather in {city} is sunny ({MARKER})."


def slow_lookup(key: str) -> str:
    """Look up a key.

    Args:
        key: The key.
    """
    time.sleep(TOOL_SECONDS)
    return f"value of {key} ({MARKER})"


async def slow_lookup_async(key: str) -> str:
    """Look up a key.

    Args:
        key: The key.
    """
    await asyncio.sleep(TOOL_SECONDS)
    return f"value of {key} ({MARKER})"


slow_lookup_async.__name__ = "slow_lookup"  # the model sees one tool name, whichever kind runs

PLAIN_TOOLS: dict[str, Callable[..., Any]] = {
    "one": get_weather,
    "four-sync": slow_lookup,
    "four-async": slow_lookup_async,
}
"""The benchmark's tools as plain functions; each adapter wraps them in its framework's decorator."""


@dataclass
class Framework:
    """How one framework builds and runs the benchmark agent."""

    name: str
    package: str  # the distribution whose version is reported
    module: str  # what must be importable
    build: Callable[[str, str], Any]  # (base_url, tools: "one" | "four-sync" | "four-async") -> agent
    run: Callable[[Any, str], Awaitable[str] | str]  # (agent, prompt) -> answer; sync for smolagents
    instantiate: Callable[[], Any]  # a whole agent with one tool, as agno's method builds it
    async_tools: bool = True  # whether the framework takes async tool functions

    @property
    def version(self) -> str:
        return metadata.version(self.package)


async def call(framework: Framework, agent: Any, prompt: str) -> str:
    """Run the agent once and return its answer, awaiting where the framework is async."""
    answer = framework.run(agent, prompt)
    if isinstance(answer, Awaitable):
        answer = await answer
    return str(answer)


async def interleaved(
    runners: dict[Any, Callable[[], Awaitable[str]]], runs: int, seed: int, warm_ups: int
) -> tuple[dict[Any, list[float]], dict[Any, list[float]]]:
    """Wall and CPU seconds of ``runs`` runs of each runner, every round in a new shuffled order.

    Each runner first runs ``warm_ups`` times, and must give the scripted answer:
    anything else means the benchmark, not the framework, is broken.
    """
    for key, run in runners.items():
        for _ in range(warm_ups):
            answer = await run()
            if ANSWER not in answer:
                raise RuntimeError(f"{key} answered {answer!r}, not the scripted answer: the benchmark is broken")
    wall: dict[Any, list[float]] = {key: [] for key in runners}
    cpu: dict[Any, list[float]] = {key: [] for key in runners}
    order = list(runners)
    shuffle = random.Random(seed)
    for _ in range(runs):
        shuffle.shuffle(order)
        for key in order:
            started, started_cpu = time.perf_counter(), time.process_time()
            await runners[key]()
            wall[key].append(time.perf_counter() - started)
            cpu[key].append(time.process_time() - started_cpu)
    return wall, cpu


# -- Cortana ------------------------------------------------------------------------------------------


def _cortana() -> Framework:
    from cortana import Agent, tool
    from cortana.models.openai_compat import OpenAICompatClient

    tools = {kind: tool(function) for kind, function in PLAIN_TOOLS.items()}

    def client(base_url: str) -> OpenAICompatClient:
        return OpenAICompatClient(MODEL, base_url=base_url)

    def build(base_url: str, kind: str) -> Agent:
        return Agent(client(base_url), instructions=INSTRUCTIONS, tools=[tools[kind]])

    async def run(agent: Agent, prompt: str) -> str:
        return (await agent.run(prompt)).output

    def instantiate() -> Agent:
        return Agent(client("http://127.0.0.1:9/one/v1"), instructions=INSTRUCTIONS, tools=[tools["one"]])

    return Framework("cortana", "cortana", "cortana", build, run, instantiate)


# -- pydantic-ai --------------------------------------------------------------------------------------


def _pydantic_ai() -> Framework:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    tools = PLAIN_TOOLS

    def model(base_url: str) -> OpenAIChatModel:
        return OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="not-needed"))

    def build(base_url: str, kind: str) -> Agent[None, str]:
        return Agent(model(base_url), instructions=INSTRUCTIONS, tools=[tools[kind]])

    async def run(agent: Agent[None, str], prompt: str) -> str:
        return (await agent.run(prompt)).output

    def instantiate() -> Agent[None, str]:
        return Agent(model("http://127.0.0.1:9/one/v1"), instructions=INSTRUCTIONS, tools=[tools["one"]])

    return Framework("pydantic-ai", "pydantic-ai-slim", "pydantic_ai", build, run, instantiate)


# -- agno ---------------------------------------------------------------------------------------------


def _agno() -> Framework:
    from agno.agent import Agent
    from agno.models.openai import OpenAILike

    tools = PLAIN_TOOLS

    def model(base_url: str) -> OpenAILike:
        return OpenAILike(id=MODEL, base_url=base_url, api_key="not-needed")

    def build(base_url: str, kind: str) -> Agent:
        return Agent(model=model(base_url), instructions=INSTRUCTIONS, tools=[tools[kind]], telemetry=False)

    async def run(agent: Agent, prompt: str) -> str:
        return str((await agent.arun(prompt)).content)

    def instantiate() -> Agent:
        return Agent(
            model=model("http://127.0.0.1:9/one/v1"), instructions=INSTRUCTIONS, tools=[tools["one"]], telemetry=False
        )

    return Framework("agno", "agno", "agno", build, run, instantiate)


# -- smolagents ---------------------------------------------------------------------------------------


def _smolagents() -> Framework:
    from smolagents import LogLevel, OpenAIServerModel, ToolCallingAgent, tool

    tools = {kind: tool(function) for kind, function in PLAIN_TOOLS.items() if kind != "four-async"}

    def model(base_url: str) -> OpenAIServerModel:
        return OpenAIServerModel(model_id=MODEL, api_base=base_url, api_key="not-needed")

    def build(base_url: str, kind: str) -> ToolCallingAgent:
        return ToolCallingAgent(
            tools=[tools[kind]], model=model(base_url), instructions=INSTRUCTIONS, verbosity_level=LogLevel.OFF
        )

    def run(agent: ToolCallingAgent, prompt: str) -> str:
        return str(agent.run(prompt))

    def instantiate() -> ToolCallingAgent:
        return ToolCallingAgent(
            tools=[tools["one"]],
            model=model("http://127.0.0.1:9/one/v1"),
            instructions=INSTRUCTIONS,
            verbosity_level=LogLevel.OFF,
        )

    return Framework("smolagents", "smolagents", "smolagents", build, run, instantiate, async_tools=False)


# -- OpenAI Agents SDK --------------------------------------------------------------------------------


def _openai_agents() -> Framework:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    tools = {kind: function_tool(function) for kind, function in PLAIN_TOOLS.items()}

    def model(base_url: str) -> OpenAIChatCompletionsModel:
        return OpenAIChatCompletionsModel(MODEL, openai_client=AsyncOpenAI(base_url=base_url, api_key="not-needed"))

    def build(base_url: str, kind: str) -> Agent:
        return Agent(name="assistant", instructions=INSTRUCTIONS, model=model(base_url), tools=[tools[kind]])

    async def run(agent: Agent, prompt: str) -> str:
        return str((await Runner.run(agent, prompt)).final_output)

    def instantiate() -> Agent:
        return Agent(
            name="assistant", instructions=INSTRUCTIONS, model=model("http://127.0.0.1:9/one/v1"), tools=[tools["one"]]
        )

    return Framework("openai-agents", "openai-agents", "agents", build, run, instantiate)


# -- LangGraph ----------------------------------------------------------------------------------------


def _langgraph() -> Framework:
    import warnings

    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*create_react_agent.*")

    tools = {kind: tool(function) for kind, function in PLAIN_TOOLS.items()}

    def model(base_url: str) -> ChatOpenAI:
        return ChatOpenAI(model=MODEL, base_url=base_url, api_key="not-needed")  # type: ignore[arg-type]

    def build(base_url: str, kind: str) -> Any:
        return create_react_agent(model=model(base_url), tools=[tools[kind]], prompt=INSTRUCTIONS)

    async def run(agent: Any, prompt: str) -> str:
        state = await agent.ainvoke({"messages": [("user", prompt)]})
        return str(state["messages"][-1].content)

    def instantiate() -> Any:
        return create_react_agent(model=model("http://127.0.0.1:9/one/v1"), tools=[tools["one"]], prompt=INSTRUCTIONS)

    return Framework("langgraph", "langgraph", "langgraph", build, run, instantiate)


FACTORIES: dict[str, tuple[str, Callable[[], Framework]]] = {
    "cortana": ("cortana", _cortana),
    "pydantic-ai": ("pydantic_ai", _pydantic_ai),
    "agno": ("agno", _agno),
    "smolagents": ("smolagents", _smolagents),
    "openai-agents": ("agents", _openai_agents),
    "langgraph": ("langgraph", _langgraph),
}


def available(names: list[str] | None = None) -> tuple[list[Framework], list[str]]:
    """The frameworks that are installed (in the order asked), and the names of those that are not."""
    found, missing = [], []
    for name in names or list(FACTORIES):
        module, factory = FACTORIES[name]
        if importlib.util.find_spec(module) is None:
            missing.append(name)
        else:
            found.append(factory())
    return found, missing

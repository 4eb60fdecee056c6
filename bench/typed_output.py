"""Typed output on a real small model: the schema-constrained route against asking for JSON in free text.

Two small extractions run ``--runs`` times each at temperature 0.7 per arm, on the same engine, side by side:
a contact card from one sentence, and every person (name and age) from a sentence that names three.

- typed: ``Agent(output_type=Contact)``: the answer constrained by llama.cpp's ``json_schema`` (a grammar),
  validated, retried with the error up to twice;
- free text: the same instructions asking for JSON, no constraint, parsed once (what a caller did before).

Counted: answers that validate as a ``Contact`` with the right values.

    python bench/typed_output.py [--runs 20] [--model qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from cortana import Agent
from cortana.agent.output import OutputValidationError
from cortana.models.base import ModelClient, ModelSettings

RESULTS = Path(__file__).resolve().parent / "results"
PROMPT = "Extract the contact: Maria Lopez, maria.lopez@example.org, works at Acme Robotics as a welder, age 41."
INSTRUCTIONS = "Extract contact details. Answer with a JSON object with the keys name, email, company, age."


class Contact(BaseModel):
    name: str
    email: str
    company: str
    age: int


class Person(BaseModel):
    name: str
    age: int


PEOPLE = "Ana (29) and her brother Luis, 34, met Dr. Wei Chen, who is 61, at the station."
PEOPLE_INSTRUCTIONS = "List every person mentioned. Answer with a JSON array of objects with the keys name and age."
PEOPLE_AGES = [29, 34, 61]


def right_people(people: list[Person]) -> bool:
    return [person.age for person in people] == PEOPLE_AGES


def right(contact: Contact) -> bool:
    return (contact.name, contact.email.lower(), contact.age) == ("Maria Lopez", "maria.lopez@example.org", 41) and (
        "acme" in contact.company.lower()
    )


TASKS: dict[str, tuple[str, str, Any, Any]] = {
    "contact": (INSTRUCTIONS, PROMPT, Contact, right),
    "people": (PEOPLE_INSTRUCTIONS, PEOPLE, list[Person], right_people),
}


async def typed(client: ModelClient, runs: int, task: str) -> dict[str, Any]:
    instructions, prompt, output_type, check = TASKS[task]
    agent = Agent(client, instructions=instructions, output_type=output_type, settings=ModelSettings(temperature=0.7))
    valid = correct = calls = 0
    started = time.perf_counter()
    for _ in range(runs):
        try:
            result = await agent.run(prompt)
        except OutputValidationError:
            continue
        valid += 1
        correct += check(result.output)
        calls += result.metrics.model_calls
    return {
        "valid": valid,
        "correct": correct,
        "model_calls": calls,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def free_text(client: ModelClient, runs: int, task: str) -> dict[str, Any]:
    instructions, prompt, output_type, check = TASKS[task]
    adapter: TypeAdapter[Any] = TypeAdapter(output_type)
    agent = Agent(client, instructions=instructions, settings=ModelSettings(temperature=0.7))
    valid = correct = 0
    started = time.perf_counter()
    for _ in range(runs):
        text = (await agent.run(prompt)).output.strip().removeprefix("```json").removesuffix("```")
        try:
            value = adapter.validate_json(text)
        except ValidationError:
            continue
        valid += 1
        correct += check(value)
    return {"valid": valid, "correct": correct, "model_calls": runs, "seconds": round(time.perf_counter() - started, 1)}


async def main_async(model: str, runs: int) -> dict[str, Any]:
    from cortana.models.embedded import EmbeddedClient

    client = await EmbeddedClient.start(model, context_window=2048)
    try:
        figures: dict[str, Any] = {"model": model, "runs": runs}
        for task in TASKS:
            figures[task] = {"typed": await typed(client, runs, task), "free_text": await free_text(client, runs, task)}
        return figures
    finally:
        await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args.model, args.runs))
    (RESULTS / f"typed_output_{args.model}.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Typed output on the real 0.5B model: a small extraction returns a valid value every time, at temperature 0.7
(llama.cpp builds a grammar from the schema; bench/typed_output.py compares it with free text)."""

from __future__ import annotations

from pydantic import BaseModel

from cortana import Agent
from cortana.models.base import ModelSettings
from cortana.models.llamacpp import LlamaCppClient


class Contact(BaseModel):
    name: str
    email: str
    company: str
    age: int


async def test_twenty_extractions_at_temperature_07_all_validate(engine_url: str, engine_key: str) -> None:
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    agent = Agent(
        client,
        instructions="Extract contact details as JSON.",
        output_type=Contact,
        settings=ModelSettings(temperature=0.7, max_tokens=200),
    )
    try:
        values = [
            (await agent.run("Maria Lopez, maria.lopez@example.org, welder at Acme Robotics, 41 years old.")).output
            for _ in range(20)
        ]
    finally:
        await client.aclose()
    assert all(isinstance(value, Contact) for value in values)
    assert sum(value.age == 41 for value in values) >= 15, [value.model_dump() for value in values]

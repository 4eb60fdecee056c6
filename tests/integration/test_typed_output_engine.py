"""Typed output on the real 0.5B model: a small extraction returns a valid value every time, at temperature 0.7
(llama.cpp builds a grammar from the schema; bench/typed_output.py compares it with free text)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from cortana import Agent
from cortana.models.base import ModelSettings
from cortana.models.llamacpp import LlamaCppClient


class Contact(BaseModel):
    name: str
    email: str
    company: str
    age: int


def _extractor(client: LlamaCppClient, *, temperature: float, **options: Any) -> Agent[Contact]:
    settings = ModelSettings(temperature=temperature, max_tokens=200)
    return Agent(
        client, instructions="Extract contact details as JSON.", output_type=Contact, settings=settings, **options
    )


async def test_twenty_extractions_at_temperature_07_all_validate(engine_url: str, engine_key: str) -> None:
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    agent = _extractor(client, temperature=0.7)
    try:
        values = [
            (await agent.run("Maria Lopez, maria.lopez@example.org, welder at Acme Robotics, 41 years old.")).output
            for _ in range(20)
        ]
    finally:
        await client.aclose()
    assert all(isinstance(value, Contact) for value in values)
    assert sum(value.age == 41 for value in values) >= 15, [value.model_dump() for value in values]


async def test_traced_with_content_streamed_partially_on_the_real_engine(engine_url: str, engine_key: str) -> None:
    """Typed output, tracing with content on and streaming together, on llama.cpp and the 0.5B model."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from cortana import Instrumentation
    from cortana.agent.events import PartialOutput

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = await LlamaCppClient(base_url=engine_url, api_key=engine_key).connect()
    agent = _extractor(
        client, temperature=0.0, instrument=Instrumentation(include_content=True, tracer_provider=provider)
    )
    try:
        stream = agent.run_stream("Maria Lopez, maria.lopez@example.org, welder at Acme Robotics, 41 years old.")
        partials = [event.value async for event in stream if isinstance(event, PartialOutput)]
    finally:
        await client.aclose()
    contact = stream.result.output
    assert isinstance(contact, Contact)
    assert partials and partials[-1] == contact and all(isinstance(value, Contact) for value in partials)
    spans = {span.name.split()[0]: span for span in exporter.get_finished_spans()}
    run, chat = spans["invoke_agent"], spans["chat"]
    shown = (run.attributes or {})["gen_ai.output.messages"]
    assert contact.model_dump_json() in str(shown).replace('\\"', '"')
    assert (chat.attributes or {})["gen_ai.output.type"] == "json" and chat.parent == run.context

"""The whole assistant without a terminal: what `cortana` runs, driven from a script.

A scripted model stands in for the engine so this runs anywhere; give ``client=`` a real one
(``await create_model_client()``), or leave it out to start the engine cortana.yml names.
"""

import asyncio
import tempfile
from pathlib import Path

from cortana import Assistant, Settings
from cortana.testing import ScriptedModel, tool_call, tool_call_response


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "notes.md").write_text("Standup moved to 9:30 on Fridays.\n")
    model = ScriptedModel([
        tool_call_response(tool_call("read_file", path="notes.md")),  # the model reads the file...
        "On Fridays standup is at 9:30.",  # ...and answers from it
        "You asked when standup is on Fridays.",
    ])  # fmt: skip
    settings = Settings(memory={"recall": False}, graphify={"enabled": False})
    async with Assistant(folder, settings, client=model, heartbeat=False) as assistant:
        first = await assistant.ask("When is standup on Friday?")
        print(first.output, f"({first.metrics.tool_calls} tool call)")
        again = await assistant.ask("What did I just ask you?")  # the same thread: memory holds the first turn
        print(again.output)
        stored = await assistant.memory.messages(assistant.thread)
        print(f"{len(stored)} messages kept in {assistant.memory.location}")


if __name__ == "__main__":
    asyncio.run(main())

"""Images in messages: the part itself, memory, each engine's wire body, and the refusal of a model without vision.

The wire bodies go through the real adapters to a loopback server (tests/wire.py) and are read back as the server
received them: Ollama's from its documented format (tests/fixtures/ollama/show_vision.json), llama.cpp's from the
server's captured /props with ``modalities.vision`` as a server started with ``--mmproj`` reports it.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from cortana import Agent, Image, ImageError, Message, ModelError, UserError
from cortana.agent.compaction import estimate_tokens, render_transcript
from cortana.memory.sqlite import SQLiteMemory
from cortana.messages import IMAGE_TOKENS, MAX_IMAGE_BYTES, MAX_IMAGES, ThreadRef
from cortana.models.base import ModelRequest, ModelResponse, ToolSpec
from cortana.models.docker import DockerModelRunnerClient
from cortana.models.embedded import EmbeddedClient
from cortana.models.llamacpp import LlamaCppClient
from cortana.models.ollama import OllamaClient
from cortana.testing import ScriptedModel
from tests.wire import FIXTURES, Reply, WireServer

LLAMA = FIXTURES / "llamacpp"
CHAT = "/v1/chat/completions"
WEATHER = ToolSpec(
    "get_weather",
    "Get the weather in a given city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG of ``width`` x ``height`` grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PNG = png()


@pytest.fixture
def wire() -> Iterator[WireServer]:
    server = WireServer()
    yield server
    server.stop()


def llama_props(*, vision: bool, template: bool = True) -> dict[str, Any]:
    """The captured /props (its modalities say vision: false), with vision as a server with a projector says it."""
    props: dict[str, Any] = json.loads((LLAMA / "q05_props.json").read_text())
    props["modalities"]["vision"] = vision
    if not template:
        del props["chat_template"]
    return props


def serve_llama(wire: WireServer, props: dict[str, Any]) -> str:
    wire.add("GET", "/health", Reply(body=(LLAMA / "q05_health.json").read_bytes()))
    wire.add("GET", "/props", Reply.json(props))
    wire.add("GET", "/slots", Reply(body=(LLAMA / "q05_slots.json").read_bytes()))
    wire.add("POST", CHAT, Reply.sse_file(LLAMA / "q05_chat_plain_stream.sse.txt"))
    return wire.start()


async def drain(client: Any, request: ModelRequest) -> ModelResponse:
    events = [event async for event in client.stream(request)]
    assert isinstance(events[-1], ModelResponse)
    return events[-1]


# -- the part --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "image/jpeg"),
        (b"GIF89a\x01\x00\x01\x00\x00\x00\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
    ],
)
def test_each_kind_is_known_by_its_first_bytes(data: bytes, kind: str) -> None:
    assert Image(data=data).media_type == kind
    assert Image.of_bytes(data, "x").media_type == kind


def test_bytes_that_are_no_image_are_refused_naming_the_kinds_taken(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not a PNG, JPEG, GIF or WebP image"):
        Image(data=b"%PDF-1.7 not a picture")
    (tmp_path / "notes.png").write_text("a text file with the wrong name")
    with pytest.raises(ImageError, match=r"notes.png is not a PNG, JPEG, GIF or WebP image"):
        Image.from_path(tmp_path / "notes.png")
    with pytest.raises(ImageError, match="empty"):
        Image.of_bytes(b"", "nothing.png")


def test_an_image_over_the_limit_is_refused_with_its_size_and_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "huge.png"
    with open(big, "wb") as handle:  # sparse: 21 MB that take no disk, refused by its size before it is read
        handle.write(PNG[:8])
        handle.truncate(21 * 1024 * 1024)
    with pytest.raises(ImageError, match=r"huge.png is 21.0 MB; an image may be at most 20 MB"):
        Image.from_path(big)
    with pytest.raises(ValidationError, match=r"is 20.0 MB; an image may be at most 20 MB"):
        Image(data=PNG[:8] + bytes(MAX_IMAGE_BYTES))
    assert Image(data=PNG[:8] + bytes(MAX_IMAGE_BYTES - 8)).size == MAX_IMAGE_BYTES, "the limit itself is allowed"


def test_a_declared_kind_must_be_the_kind_of_the_bytes() -> None:
    assert Image(data=PNG, media_type="image/png").media_type == "image/png"
    with pytest.raises(ValidationError, match="given as image/jpeg, but its bytes are a PNG image"):
        Image(data=PNG, media_type="image/jpeg")


def test_urls_are_http_and_a_data_url_becomes_bytes() -> None:
    assert Image(url="https://example.org/cat.png").url == "https://example.org/cat.png"
    with pytest.raises(ValidationError, match="must be http"):
        Image(url="file:///etc/passwd.png")
    inline = Image(url="data:image/png;base64," + base64.b64encode(PNG).decode())
    assert (inline.data, inline.url, inline.media_type) == (PNG, None, "image/png")
    with pytest.raises(ValidationError, match="one source"):
        Image()


def test_only_a_user_message_carries_images_and_no_more_than_the_bound() -> None:
    image = Image(data=PNG, name="shot.png")
    assert Message.user("what is this?", images=[image]).images == [image]
    with pytest.raises(ValidationError, match="only a user message carries images"):
        Message(role="assistant", content="", images=[image])
    with pytest.raises(ValidationError, match=f"at most {MAX_IMAGES} images"):
        Message.user("many", images=[image] * (MAX_IMAGES + 1))


def test_a_repr_shows_how_many_bytes_not_the_bytes() -> None:
    shown = repr(Message.user("x", images=[Image(data=PNG + bytes(5000), name="shot.png")]))
    assert f"<{len(PNG) + 5000} bytes>" in shown and "\\x00\\x00\\x00" not in shown


# -- memory ----------------------------------------------------------------------------------------------------------


async def test_a_thread_reloads_its_images_from_the_memory_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    thread = ThreadRef(thread_id="pictures")
    image = Image(data=PNG, name="shot.png")
    memory = SQLiteMemory(path)
    await Agent(ScriptedModel(["A grey square."]), memory=memory).run("What is this?", thread=thread, images=[image])
    memory.close()
    reopened = SQLiteMemory(path)  # another process, later: the file alone
    model = ScriptedModel(["It was grey."])
    await Agent(model, memory=reopened).run("What colour was it?", thread=thread)
    reopened.close()
    first = next(message for message in model.requests[0].messages if message.role == "user")
    assert first.role == "user" and first.content.endswith("What is this?")
    assert first.images == [image] and first.images[0].data == PNG, "the bytes come back exactly"
    assert model.requests[0].messages[-1].images == [], "the new message has none"


async def test_a_model_without_vision_is_refused_before_anything_is_sent_or_stored(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db")
    model = ScriptedModel(["never"], reads_images=False)
    with pytest.raises(ModelError, match=r"scripted model \(scripted\) cannot be shown images: use a vision model"):
        await Agent(model, memory=memory).run("What is this?", thread="t", images=[Image(data=PNG)])
    assert model.requests == []
    assert await memory.messages(ThreadRef(thread_id="t")) == [], "a stored image would fail every later turn"
    memory.close()


async def test_an_earlier_turns_image_becomes_a_note_for_a_model_without_vision() -> None:
    history = [Message.user("Look:", images=[Image(data=PNG, name="shot.png")]), Message.assistant("A grey square.")]
    model = ScriptedModel(["It was grey."], reads_images=False)
    await Agent(model).run("What colour was it?", history=history)
    earlier = next(message for message in model.requests[0].messages if message.role == "user")
    assert earlier.images == []
    assert earlier.content == "Look:\n[image shot.png: not shown, this model cannot be shown images]"


# -- the wire --------------------------------------------------------------------------------------------------------


async def test_ollama_gets_base64_images_in_the_message_after_show_lists_vision(wire: WireServer) -> None:
    wire.add("POST", "/api/show", Reply.fixture("ollama/show_vision"))
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = await OllamaClient("llava:7b", base_url=wire.start(), context_window=4096).connect()
    assert client.supports_images
    await drain(client, ModelRequest([Message.user("What is in this picture?", images=[Image(data=PNG)])]))
    await client.aclose()
    [body] = wire.bodies("/api/chat")
    assert body["messages"] == [
        {"role": "user", "content": "What is in this picture?", "images": [base64.b64encode(PNG).decode("ascii")]}
    ]
    assert base64.b64decode(body["messages"][0]["images"][0], validate=True) == PNG, "standard base64, no data: prefix"


async def test_ollama_without_vision_refuses_before_any_chat_request(wire: WireServer) -> None:
    wire.add("POST", "/api/show", Reply.fixture("ollama/show"))  # capabilities: completion, tools
    wire.add("POST", "/api/chat", Reply.fixture("ollama/chat_plain_stream"))
    client = await OllamaClient("qwen2.5:0.5b", base_url=wire.start()).connect()
    with pytest.raises(ModelError, match=r"Ollama \(qwen2.5:0.5b\) cannot be shown images: .*ollama pull qwen2.5vl"):
        await drain(client, ModelRequest([Message.user("What is this?", images=[Image(data=PNG)])]))
    await client.aclose()
    assert [r.path for r in wire.requests] == ["/api/show"]


async def test_llamacpp_gets_image_parts_on_the_chat_path_even_where_calls_are_guided(wire: WireServer) -> None:
    client = await LlamaCppClient(base_url=serve_llama(wire, llama_props(vision=True))).connect()
    assert client.supports_images and client.guides_tool_calls
    request = ModelRequest([Message.user("What is in this picture?", images=[Image(data=PNG)])], tools=[WEATHER])
    await drain(client, request)
    await client.aclose()
    assert [r.path for r in wire.requests if r.method == "POST"] == [CHAT], "not /apply-template, not /completion"
    [body] = wire.bodies(CHAT)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
            ],
        }
    ]


async def test_llamacpp_without_a_projector_refuses_before_any_request(wire: WireServer) -> None:
    client = await LlamaCppClient(base_url=serve_llama(wire, llama_props(vision=False))).connect()
    with pytest.raises(ModelError, match=r"llama.cpp \(qwen0.5.gguf\) cannot be shown images: .*--mmproj"):
        await drain(client, ModelRequest([Message.user("What is this?", images=[Image(data=PNG)])]))
    with pytest.raises(ModelError, match="cannot be shown images"):
        await client.complete_many(ModelRequest([Message.user("?", images=[Image(data=PNG)])]), 2)
    await client.aclose()
    assert [r.path for r in wire.requests] == ["/health", "/props", "/slots"]


async def test_the_embedded_engine_says_its_bundled_models_read_no_images(wire: WireServer) -> None:
    server: Any = SimpleNamespace(url=serve_llama(wire, llama_props(vision=False)), api_key=None)
    client = await EmbeddedClient(server, "qwen2.5-coder-1.5b").connect()
    refused = client.images_refused([Image(data=PNG)])
    assert isinstance(refused, ModelError)
    assert "bundled Qwen2.5-Coder ones too) read no images" in str(refused) and "qwen2.5vl" in str(refused)
    await client.http.aclose()


async def test_a_local_engine_takes_no_image_url_and_an_openai_compatible_server_gets_it(wire: WireServer) -> None:
    url = "https://example.org/chart.png"
    address = serve_llama(wire, llama_props(vision=True))
    client = await LlamaCppClient(base_url=address).connect()
    with pytest.raises(UserError, match=r"as bytes only .*download it and give the file"):
        await drain(client, ModelRequest([Message.user("?", images=[Image(url=url)])]))
    await client.aclose()
    assert wire.bodies(CHAT) == []
    wire.add("POST", "/engines/v1/chat/completions", Reply.fixture("dmr/chat_plain_stream_usage"))
    docker = DockerModelRunnerClient("ai/gemma3", base_url=address)
    await drain(docker, ModelRequest([Message.user("What is this?", images=[Image(url=url)])]))
    await docker.aclose()
    [body] = wire.bodies("/engines/v1/chat/completions")
    assert body["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": url}}


async def test_a_server_that_cannot_see_says_so_clearly(wire: WireServer) -> None:
    error = {
        "error": {
            "code": 500,
            "message": "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
            "type": "server_error",
        }
    }  # llama.cpp's answer without a projector (server-common.cpp), which Docker Model Runner passes on
    wire.add("POST", "/engines/v1/chat/completions", Reply.json(error, status=500))
    docker = DockerModelRunnerClient("ai/smollm2", base_url=wire.start(), max_retries=0)
    with pytest.raises(ModelError, match=r"\(ai/smollm2\) cannot be shown images \(image input is not supported"):
        await drain(docker, ModelRequest([Message.user("What is this?", images=[Image(data=PNG)])]))
    await docker.aclose()


# -- counting --------------------------------------------------------------------------------------------------------


def test_an_image_counts_as_a_fixed_number_of_tokens_not_its_base64() -> None:
    big = Image(data=PNG + bytes(1_000_000))
    plain = [Message.user("What is this?")]
    shown = [Message.user("What is this?", images=[big])]
    assert estimate_tokens(shown, []) == estimate_tokens(plain, []) + IMAGE_TOKENS
    ollama = OllamaClient("llava:7b", base_url="http://127.0.0.1:1")
    assert ollama.estimate_tokens(ModelRequest(shown)) == ollama.estimate_tokens(ModelRequest(plain)) + IMAGE_TOKENS
    assert "[image: a PNG of" in render_transcript(shown), "the summarizer reads that an image was shown"


async def test_llamacpp_counts_the_text_with_its_tokenizer_and_each_image_as_the_estimate(wire: WireServer) -> None:
    wire.add("POST", "/apply-template", Reply(body=(LLAMA / "q05_apply_template.json").read_bytes()))
    wire.add("POST", "/tokenize", Reply(body=(LLAMA / "q05_tokenize.json").read_bytes()))
    client = LlamaCppClient("m", base_url=wire.start())
    text = await client.count_tokens([Message.user("What is this?")])
    counted = await client.count_tokens([Message.user("What is this?", images=[Image(data=PNG)] * 2)])
    await client.aclose()
    assert counted == text + 2 * IMAGE_TOKENS
    assert wire.bodies("/apply-template")[1] == {"messages": [{"role": "user", "content": "What is this?"}]}


def test_the_documented_examples_run_as_written(tmp_path: Path) -> None:
    """docs/images.md's examples, run in a folder holding chart.png; each printed line is the one its comment says."""
    import re
    import subprocess
    import sys

    text = (Path(__file__).parents[2] / "docs" / "images.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    (tmp_path / "chart.png").write_bytes(PNG)
    for block in blocks:
        (tmp_path / "example.py").write_text(block)
        done = subprocess.run([sys.executable, "example.py"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        expected = re.findall(r"^print\(.*\)  # (.*)$", block, re.M)
        assert done.stdout.splitlines() == expected

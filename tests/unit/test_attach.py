"""``@shot.png`` and pasted image paths: read by one helper (``cortana.turn.attach``) in ``Assistant.turn``, for the
front ends whose prompt the user typed, and on the wire as an image part.

The terminal is driven through prompt_toolkit's pipe input, ``cortana -p`` as a real process, both against a
loopback llama.cpp server whose captured /props say ``modalities.vision`` (true as a server with a projector says).
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cortana import Assistant, Message, UserError
from cortana.config import load_settings
from cortana.messages import MAX_IMAGES
from cortana.models.factory import create_model_client
from cortana.serve import refuse_over_api
from cortana.tools.builtin import Workspace
from cortana.turn.attach import attach_images, image_mentions
from tests.integration.test_cli_terminal import text_reply
from tests.unit.test_images import PNG, llama_props, png
from tests.wire import FIXTURES, Reply, WireServer

CHAT = "/v1/chat/completions"
QUIET = (
    "memory:\n  recall: false\ngraphify:\n  enabled: false\nheartbeat:\n  enabled: false\n"
    "learning:\n  enabled: false\nagent:\n  prompt_search: 0\n  named_files: 0\n"
)
DATA_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.mark.parametrize(
    ("prompt", "found"),
    [
        ("What is in @shot.png?", [("shot.png", True)]),
        ("compare @img/a.webp and @img/b.JPG.", [("img/a.webp", True), ("img/b.JPG", True)]),
        ('@"my shot.gif" please', [("my shot.gif", True)]),
        ("see /home/me/My\\ Shots/a.png now", [("/home/me/My Shots/a.png", False)]),
        ("see '/tmp/two words.jpeg'", [("/tmp/two words.jpeg", False)]),
        ("~/Pictures/cat.png, what breed?", [("~/Pictures/cat.png", False)]),
        ("rename shots/a.png to b.png", []),  # a relative name without @ is a file to work on
        ("mail me at ana@shot.png", []),  # @ inside a word: an address, not a mention
        ("read @notes.txt", []),  # not an image
    ],
)
def test_the_paths_a_message_names_as_images(prompt: str, found: list[tuple[str, bool]]) -> None:
    assert [(mention.path, mention.explicit) for mention in image_mentions(prompt)] == found


@pytest.fixture
def space(tmp_path: Path) -> Workspace:
    root = tmp_path / "project"
    (root / "img").mkdir(parents=True)
    (root / "shot.png").write_bytes(PNG)
    (root / "img" / "fake.png").write_text("not a picture")
    (tmp_path / "outside.png").write_bytes(PNG)
    (root / "link.png").symlink_to(tmp_path / "outside.png")
    return Workspace(root, sandbox=False)


def test_an_at_mention_in_the_workspace_is_attached_and_the_text_is_kept(space: Workspace) -> None:
    found = attach_images("What is in @shot.png? And @shot.png again.", space, reads_images=True)
    assert [(image.name, image.data) for image in found.images] == [("shot.png", PNG)], "once, by its name"


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        ("@missing.png", r"@missing.png: No file 'missing.png'.*nothing was sent"),
        ("@../outside.png", r"outside the workspace"),
        ("@link.png", r"outside the workspace"),  # a symlink out is never followed
        ("@img/fake.png", r"@img/fake.png: fake.png is not a PNG, JPEG, GIF or WebP image"),
    ],
)
def test_an_at_mention_that_cannot_be_attached_is_an_error_before_anything_is_sent(
    space: Workspace, prompt: str, error: str
) -> None:
    with pytest.raises(UserError, match=error):
        attach_images(prompt, space, reads_images=True)


def test_a_pasted_absolute_path_is_the_users_own_and_goes_only_to_a_model_that_sees(
    space: Workspace, tmp_path: Path
) -> None:
    pasted = f"what is {tmp_path / 'outside.png'} showing?"
    assert [image.data for image in attach_images(pasted, space, reads_images=True).images] == [PNG]
    assert attach_images(pasted, space, reads_images=False).images == (), "a text-only model: the path stays text"
    typed = f"@{tmp_path / 'outside.png'}"  # typed with @: the user's own path, outside the workspace too
    assert len(attach_images(typed, space, reads_images=True).images) == 1
    gone = attach_images("see /no/such/folder/x.png", space, reads_images=True)
    assert gone.images == () and gone.left == (), "a pasted path that is no file is only text"
    bad = attach_images(f"see {space.root / 'img' / 'fake.png'}", space, reads_images=True)
    assert bad.images == () and "was not attached: fake.png is not a PNG" in bad.left[0]


# -- the front ends --------------------------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".config" / "cortana").mkdir(parents=True)
    root = home / "project"
    root.mkdir()
    (root / "cortana.yml").write_text(QUIET)
    (root / "shot.png").write_bytes(PNG)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def engine() -> Iterator[WireServer]:
    """A llama.cpp server that reads images (its /props without the chat template: the chat path, scripted)."""
    server = WireServer()
    server.add("GET", "/health", Reply(body=(FIXTURES / "llamacpp" / "q05_health.json").read_bytes()))
    server.add("GET", "/props", Reply.json(llama_props(vision=True, template=False)))
    server.add("GET", "/slots", Reply(body=(FIXTURES / "llamacpp" / "q05_slots.json").read_bytes()))
    server.add("POST", CHAT, text_reply(["A ", "grey ", "square."]))
    server.url = server.start()  # type: ignore[attr-defined]
    yield server
    server.stop()


def last_user_message(engine: WireServer) -> dict[str, Any]:
    [body] = engine.bodies(CHAT)
    message: dict[str, Any] = body["messages"][-1]
    assert message["role"] == "user"
    return message


async def through_the_terminal(home: Path, url: str, line: str) -> str:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput
    from rich.console import Console

    from cortana.cli.repl import Repl

    settings = load_settings(home / "project")
    client = await create_model_client("llamacpp", base_url=url, settings=settings)
    assistant = Assistant(home / "project", settings, client=client, approve=refuse_over_api)
    console = Console(file=io.StringIO(), width=200)
    try:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            repl = Repl(assistant, console, loading=asyncio.ensure_future(assistant.agent()))
            repl.out = console
            pipe.send_text(f"{line}\n/exit\n")
            async with asyncio.timeout(60):
                await repl.run()
    finally:
        await assistant.aclose()
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


async def test_at_image_in_the_terminal_reaches_the_engine_as_an_image_part(home: Path, engine: Any) -> None:
    shown = await through_the_terminal(home, engine.url, "What is in @shot.png?")
    assert f"attached shot.png (PNG, {len(PNG)} bytes)" in shown and "A grey square." in shown
    content = last_user_message(engine)["content"]
    assert content[0]["type"] == "text" and content[0]["text"].endswith("What is in @shot.png?"), "the text keeps it"
    assert content[1:] == [{"type": "image_url", "image_url": {"url": DATA_URL}}]


async def test_at_image_for_a_model_without_vision_is_refused_in_the_terminal(home: Path, engine: Any) -> None:
    engine.routes[("GET", "/props")] = [Reply.json(llama_props(vision=False, template=False))]
    shown = await through_the_terminal(home, engine.url, "What is in @shot.png?")
    assert "cannot be shown images" in shown and "--mmproj" in shown
    assert engine.bodies(CHAT) == [], "nothing was sent"


def test_at_image_in_dash_p_reaches_the_engine_as_an_image_part(home: Path, engine: Any) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1"}
    if "PYTHONPATH" in os.environ:  # the checkout under test, not an installed copy
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", engine.url,
         "-p", "Describe @shot.png in three words."],
        cwd=home / "project", env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "A grey square."
    assert "attached shot.png" in done.stderr
    content = last_user_message(engine)["content"]
    assert content[0]["text"].endswith("Describe @shot.png in three words.")
    assert content[1:] == [{"type": "image_url", "image_url": {"url": DATA_URL}}]
    with sqlite3.connect(home / "project" / ".cortana" / "memory.db") as stored:
        [(body,)] = stored.execute("SELECT body FROM messages WHERE role = 'user'").fetchall()
    assert [image.data for image in Message.model_validate_json(body).images] == [PNG], "stored with the message"


async def test_the_fix_workflow_is_not_asked_to_read_an_image(home: Path, engine: Any) -> None:
    settings = load_settings(home / "project")
    client = await create_model_client("llamacpp", base_url=engine.url, settings=settings)
    assistant = Assistant(home / "project", settings, client=client, approve=refuse_over_api)
    try:
        with pytest.raises(UserError, match="The fix workflow reads no images"):
            async for _ in assistant.turn("Make the page look like @shot.png", fix=True, attach=True):
                pass
        events = [event async for event in assistant.turn("Make the page look like @shot.png", attach=True)]
    finally:
        await assistant.aclose()
    assert type(events[-1]).__name__ == "TurnFinished" and events[-1].result.route == "agent"  # type: ignore[union-attr]
    assert engine.bodies(CHAT) and engine.bodies(CHAT)[0]["messages"][-1]["content"][1]["type"] == "image_url"


def test_no_more_images_than_a_message_may_carry(space: Workspace, tmp_path: Path) -> None:
    for number in range(MAX_IMAGES + 1):
        (space.root / f"p{number}.png").write_bytes(png(number + 1, 1))
    pasted = " ".join(str(space.root / f"p{number}.png") for number in range(MAX_IMAGES + 1))
    found = attach_images(pasted, space, reads_images=True)
    assert len(found.images) == MAX_IMAGES and found.left == (
        f"{space.root / f'p{MAX_IMAGES}.png'} was not attached: at most {MAX_IMAGES} images go with one message",
    )
    typed = " ".join(f"@p{number}.png" for number in range(MAX_IMAGES + 1))
    with pytest.raises(UserError, match=f"@p{MAX_IMAGES}.png: at most {MAX_IMAGES} images"):
        attach_images(typed, space, reads_images=True)

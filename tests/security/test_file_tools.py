"""The file tools stay in the workspace, read only regular files, and read only what they show."""

from __future__ import annotations

import asyncio
import os
import tracemalloc
from pathlib import Path

import pytest

from cortana import Agent, PermissionDenied, ToolError
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.builtin import Workspace, builtin_tools, workspace_gate

HANG_GUARD_S = 30  # a call that used to hang forever fails the test instead of hanging the suite


@pytest.fixture
def space(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "file.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("the secret outside\n")
    return root


async def call(root: Path, name: str, **arguments: object) -> str:
    tool = {t.name: t for t in builtin_tools(root)}[name]
    return str(await asyncio.wait_for(tool.invoke(tool.validate(arguments)), HANG_GUARD_S))


async def test_grep_never_reads_through_a_symlink_out_of_the_workspace(space: Path) -> None:
    os.symlink(space.parent / "secret.txt", space / "leak.txt")
    os.symlink("/dev/zero", space / "zero")
    found = await call(space, "grep_files", pattern="secret|inside")
    assert "the secret outside" not in found and "sub/file.txt:1:inside" in found


async def test_pipes_and_devices_are_never_read_or_written(space: Path) -> None:
    os.mkfifo(space / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await call(space, "read_file", path="pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await call(space, "write_file", path="pipe", content="x")
    assert "inside" in await call(space, "grep_files", pattern="inside"), "grep passes the pipe by"


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(space: Path) -> None:
    workspace = Workspace(space)
    reading = workspace.resolve("sub/file.txt")
    writing = workspace.resolve("sub/new.txt")
    (space / "sub").rename(space / "moved")
    os.symlink(space.parent, space / "sub")  # the race: sub/ now points outside
    (space.parent / "file.txt").write_text("outside, same name\n")
    with pytest.raises(PermissionDenied, match="symlink"):
        workspace.open_regular(reading, "sub/file.txt")
    with pytest.raises(PermissionDenied, match="symlink"):
        workspace.write(writing, "sub/new.txt", b"x")
    assert not (space.parent / "new.txt").exists()


@pytest.mark.parametrize("path", ["a\x00b.txt", "loop/x.txt"])
async def test_a_path_that_cannot_be_opened_is_a_tool_error_the_model_reads(space: Path, path: str) -> None:
    os.symlink(space / "loop", space / "loop")  # a link to itself
    model = ScriptedModel([tool_call_response(tool_call("read_file", path=path), tool_call("list_files")), "ok"])
    agent = Agent(model, tools=builtin_tools(space), permissions=workspace_gate(space))
    result = await asyncio.wait_for(agent.run("read it"), HANG_GUARD_S)
    error, listing = result.new_messages[2:4]
    assert error.is_error and ("NUL byte" in error.content or "cannot be resolved" in error.content)
    assert not listing.is_error and result.output == "ok"


def make_big_files(space: Path) -> None:
    with open(space / "sparse.bin", "wb") as handle:
        handle.truncate(2 << 30)  # 2 GB of zeros, no disk used
    with open(space / "big.log", "w") as handle:
        handle.writelines(f"line {n} " + "x" * 100 + "\n" for n in range(400_000))  # ~44 MB of text
    with open(space / "one-line.txt", "wb") as handle:
        handle.write(b"y" * (70 << 20))  # 70 MB without a newline


async def test_a_huge_file_costs_what_its_first_screen_costs(space: Path) -> None:
    await asyncio.to_thread(make_big_files, space)
    binary = await call(space, "read_file", path="sparse.bin")
    assert binary == "'sparse.bin' is a binary file (2,147,483,648 bytes); it is not shown."
    tracemalloc.start()
    shown = await call(space, "read_file", path="big.log")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert shown.startswith("    1  line 0 ") and "call read_file again with start_line=" in shown
    assert peak < 8 << 20, f"reading the first screen of 44 MB took {peak >> 20} MB"
    shown = await call(space, "read_file", path="one-line.txt")
    assert "longer than 64 MiB; stopped reading" in shown and len(shown) < 3_000, "a line without end is not read whole"


async def test_a_catastrophic_pattern_cannot_hang_the_search(space: Path) -> None:
    (space / "as.txt").write_text("a" * 50_000 + "b\n")
    assert await call(space, "grep_files", pattern=r"(a+)+$") == "(no matches)"
    with pytest.raises(ToolError, match="RE2 syntax"):
        await call(space, "grep_files", pattern=r"(a)\1")


class RecordingEditor:
    """An editor's buffers (``cortana acp``) that records every path it is handed."""

    def __init__(self, held: dict[Path, str]) -> None:
        self.held = held
        self.paths: list[Path] = []

    def read_text(self, path: Path) -> str | None:
        self.paths.append(path)
        return self.held.get(path)

    def write_text(self, path: Path, text: str) -> bool:
        self.paths.append(path)
        self.held[path] = text
        return True


async def test_the_editor_is_handed_only_paths_the_workspace_checked(space: Path) -> None:
    """Read and written through the editor's buffers, the file tools still decide where: outside the workspace,
    a symlink out of it and Cortana's own folder never reach the editor (protected paths such as ``.git/hooks``
    are the gate's, before any tool runs, whatever the front end)."""
    inside = (space / "sub" / "file.txt").resolve()
    editor = RecordingEditor({inside: "unsaved text\n"})
    own = Workspace(space, forbidden=[space / ".cortana"])
    tools = {t.name: t for t in builtin_tools(own, buffers=editor)}

    async def run(name: str, **arguments: object) -> str:
        tool = tools[name]
        return str(await asyncio.wait_for(tool.invoke(tool.validate(arguments)), HANG_GUARD_S))

    assert "unsaved text" in await run("read_file", path="sub/file.txt")
    await run("edit_file", path="sub/file.txt", old_text="unsaved", new_text="edited")
    assert editor.held[inside] == "edited text\n" and (space / "sub" / "file.txt").read_text() == "inside\n"
    os.symlink(space.parent / "secret.txt", space / "leak.txt")
    seen = len(editor.paths)
    for name, arguments in (
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "leak.txt"}),
        ("write_file", {"path": "../secret.txt", "content": "x"}),
        ("write_file", {"path": ".cortana/settings.yml", "content": "x"}),
        ("edit_file", {"path": "leak.txt", "old_text": "secret", "new_text": "x"}),
    ):
        with pytest.raises((ToolError, PermissionDenied)):
            await run(name, **arguments)
    assert editor.paths[seen:] == [], "nothing outside, symlinked out or forbidden reached the editor"
    assert (space.parent / "secret.txt").read_text() == "the secret outside\n"


async def test_a_folder_swapped_before_the_editor_writes_a_new_file_is_not_handed_to_it(space: Path) -> None:
    """The editor follows the path it is given: a new file's folder swapped for a symlink after the check (here,
    at the moment the write is logged) must never reach it."""
    editor = RecordingEditor({})
    outside = space.parent / "elsewhere"
    outside.mkdir()

    class Swapping:
        def writing(self, path: Path, text: str, held: str | None = None) -> None:
            (space / "sub").rename(space / "sub.real")
            os.symlink(outside, space / "sub")

    tool = next(
        t for t in builtin_tools(Workspace(space), buffers=editor, write_log=Swapping()) if t.name == "write_file"
    )
    with pytest.raises(PermissionDenied, match="symlink"):
        await tool.invoke(tool.validate({"path": "sub/new.txt", "content": "x"}))
    assert editor.paths == [] and list(outside.iterdir()) == []

"""The built-in tools: behaviour, limits, path confinement, and the repeated-read cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cortana import Agent, PermissionDecision
from cortana.errors import PermissionDenied, ToolError
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.builtin import MAX_OUTPUT_CHARS, Workspace, builtin_tools, workspace_gate


@pytest.fixture
def space(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    print('hi')\n")
    (root / "notes.md").write_text("alpha\nbeta\ngamma\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("generated")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "debug.log").write_text("noise")
    return root


def tools(root: Path) -> dict:  # type: ignore[type-arg]
    return {t.name: t for t in builtin_tools(root)}


async def call(root: Path, name: str, **arguments: object) -> str:
    tool = tools(root)[name]
    return str(await tool.invoke(tool.validate(arguments)))


async def test_read_file_with_line_ranges(space: Path) -> None:
    assert await call(space, "read_file", path="notes.md", start_line=2, end_line=3) == "    2  beta\n    3  gamma"
    with pytest.raises(ToolError, match=r"No file 'nope\.md'\. Use list_files"):
        await call(space, "read_file", path="nope.md")
    with pytest.raises(ToolError, match="has 3 lines; start_line 9"):
        await call(space, "read_file", path="notes.md", start_line=9)


async def test_list_files_respects_gitignore(space: Path) -> None:
    listing = (await call(space, "list_files")).splitlines()
    assert listing == [".gitignore", "notes.md", "src/app.py"]
    assert await call(space, "list_files", pattern="*.py") == "src/app.py"


async def test_grep_with_context(space: Path) -> None:
    assert await call(space, "grep_files", pattern=r"def \w+") == "src/app.py:3:def main():"
    with_context = await call(space, "grep_files", pattern="print", context=1)
    assert with_context.splitlines() == ["src/app.py-3-def main():", "src/app.py:4:    print('hi')", "--"]
    with pytest.raises(ToolError, match="Invalid regular expression"):
        await call(space, "grep_files", pattern="(")


async def test_write_and_edit(space: Path) -> None:
    assert await call(space, "write_file", path="new/file.txt", content="one\ntwo\n") == "Wrote new/file.txt (2 lines)."
    assert await call(space, "edit_file", path="notes.md", old_text="beta", new_text="BETA") == "Edited notes.md."
    assert (space / "notes.md").read_text() == "alpha\nBETA\ngamma\n"
    with pytest.raises(ToolError, match="was not found"):
        await call(space, "edit_file", path="notes.md", old_text="delta", new_text="x")
    (space / "twice.txt").write_text("x\nx\n")
    with pytest.raises(ToolError, match="appears 2 times"):
        await call(space, "edit_file", path="twice.txt", old_text="x", new_text="y")
    assert await call(space, "edit_file", path="twice.txt", old_text="x", new_text="y", replace_all=True) == (
        "Edited twice.txt (2 replacements)."
    )
    assert (space / "twice.txt").read_text() == "y\ny\n"


async def test_python_that_no_longer_parses_is_reported_with_its_line(space: Path) -> None:
    with pytest.raises(ToolError, match=r"Wrote src/new\.py \(2 lines\), but it is not valid Python now: line 2"):
        await call(space, "write_file", path="src/new.py", content="def f():\n``x`` in lowercase\n")
    assert (space / "src" / "new.py").exists(), "the file is written all the same"
    with pytest.raises(ToolError, match=r"Edited src/app\.py, but it is not valid Python now: line 4"):
        await call(space, "edit_file", path="src/app.py", old_text="print('hi')", new_text="print('hi'")
    (space / "broken.py").write_text("def (:\n")
    assert await call(space, "edit_file", path="broken.py", old_text="def", new_text="deff") == "Edited broken.py."
    assert await call(space, "write_file", path="notes.txt", content="def (:") == "Wrote notes.txt (1 line)."


async def test_an_edit_that_misses_shows_the_text_to_copy(space: Path) -> None:
    with pytest.raises(ToolError) as small:
        await call(space, "edit_file", path="src/app.py", old_text="def main() -> None:", new_text="x")
    assert "whole text is below" in str(small.value) and "def main():\n    print('hi')" in str(small.value)
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400))
    (space / "big.py").write_text(body)
    with pytest.raises(ToolError) as big:
        await call(space, "edit_file", path="big.py", old_text="def f217(x):\n    return x - 217", new_text="x")
    message = str(big.value)
    assert "closest text is at lines" in message and "def f217(x):\n    return x + 217" in message
    assert len(message) < 1_000, "a large file is not shown whole"


async def test_run_command_exit_code_timeout_and_output_cap(space: Path) -> None:
    assert await call(space, "run_command", command="ls src; exit 3") == "exit code 3\napp.py\n"
    with pytest.raises(ToolError, match=r"did not finish within 0\.2s"):
        await call(space, "run_command", command="sleep 5", timeout=0.2)
    long = await call(space, "run_command", command=f"python3 -c \"print('x' * {MAX_OUTPUT_CHARS * 2})\"")
    assert len(long) < MAX_OUTPUT_CHARS + 200 and "output cut at 12,000" in long and "redirect the output" in long


@pytest.mark.parametrize("escape", ["../outside.txt", "/etc/passwd", "src/../../outside.txt", "link/secret.txt"])
async def test_path_escapes_are_refused_without_asking(space: Path, escape: str) -> None:
    outside = space.parent / "outside.txt"
    outside.write_text("keep me")
    (space.parent / "elsewhere").mkdir(exist_ok=True)
    (space.parent / "elsewhere" / "secret.txt").write_text("secret")
    os.symlink(space.parent / "elsewhere", space / "link")
    asked: list[str] = []

    def approve(call, tool, reason):  # type: ignore[no-untyped-def]
        asked.append(call.name)
        return PermissionDecision.allow()

    model = ScriptedModel(
        [
            tool_call_response(
                tool_call("write_file", path=escape, content="overwritten"), tool_call("read_file", path=escape)
            ),
            "ok",
        ]
    )
    agent = Agent(model, tools=builtin_tools(space), permissions=workspace_gate(space, approve=approve))
    result = await agent.run("try")
    write, read = [m for m in result.new_messages if m.role == "tool"]
    assert write.is_error and read.is_error and "outside the workspace" in write.content
    assert asked == [], "an escape is refused before anyone is asked"
    assert outside.read_text() == "keep me"
    with pytest.raises(PermissionDenied):
        Workspace(space).resolve(escape)


async def test_writes_ask_and_a_denial_keeps_the_file(space: Path) -> None:
    def deny(call, tool, reason):  # type: ignore[no-untyped-def]
        return PermissionDecision.deny("not now")

    model = ScriptedModel([tool_call_response(tool_call("write_file", path="notes.md", content="gone")), "ok"])
    result = await Agent(model, tools=builtin_tools(space), permissions=workspace_gate(space, approve=deny)).run("x")
    assert "Permission denied for 'write_file': not now" in result.new_messages[2].content
    assert (space / "notes.md").read_text() == "alpha\nbeta\ngamma\n"
    allowed = ScriptedModel([tool_call_response(tool_call("write_file", path="notes.md", content="new")), "ok"])
    await Agent(allowed, tools=builtin_tools(space), permissions=workspace_gate(space, allow=("*",))).run("x")
    assert (space / "notes.md").read_text() == "new"


async def test_repeated_reads_are_not_run_again_until_something_is_written(space: Path) -> None:
    read = tool_call("read_file", path="notes.md")
    again = tool_call("read_file", path="notes.md")
    listing = tool_call("list_files")
    write = tool_call("write_file", path="notes.md", content="changed\n")
    after = tool_call("read_file", path="notes.md")
    model = ScriptedModel(
        [
            tool_call_response(read),
            tool_call_response(again, listing),  # not all repeats: the read is answered from the cache
            tool_call_response(write),
            tool_call_response(after),
            "done",
        ]
    )
    result = await Agent(model, tools=builtin_tools(space), permissions=workspace_gate(space, allow=("*",))).run("x")
    contents = {m.tool_call_id: m.content for m in result.new_messages if m.role == "tool"}
    assert contents[read.id] == "    1  alpha\n    2  beta\n    3  gamma"
    assert contents[again.id].startswith(f"Same call as {read.id} earlier in this run")
    assert contents[after.id] == "    1  changed", "after a write the read runs again"


async def test_an_edit_that_lost_quotes_or_spaces_still_lands_and_keeps_the_files_own_lines(space: Path) -> None:
    (space / "slug.py").write_text(
        'def slugify(title: str, sep: str = "_") -> str:\n'
        '    """Words joined by ``sep``."""\n'
        "    return sep.join(title.split())\n"
    )
    # the 1.5B model's call: the docstring's quotes lost in the JSON string, in old_text and new_text
    result = await call(
        space,
        "edit_file",
        path="slug.py",
        old_text="def slugify(title: str, sep: str = '_') -> str:\n    Words joined by ``sep``.",
        new_text="def slugify(title: str, sep: str = '-') -> str:\n    Words joined by ``sep``.",
    )
    assert "matched lines 1-2 once when spaces, quote marks and left-out comment or docstring lines" in result
    assert (space / "slug.py").read_text() == (
        'def slugify(title: str, sep: str = \'-\') -> str:\n    """Words joined by ``sep``."""\n'
        "    return sep.join(title.split())\n"
    )
    (space / "twice.py").write_text("x = 'a'\nx = \"a\"\n")
    with pytest.raises(ToolError, match="was not found"):
        await call(space, "edit_file", path="twice.py", old_text="x = a", new_text="x = b")


async def test_an_empty_old_text_adds_at_the_end(space: Path) -> None:
    assert await call(space, "edit_file", path="src/app.py", old_text="", new_text="def other():\n    return 1\n") == (
        "Added 2 line(s) at the end of src/app.py."
    )
    assert (space / "src" / "app.py").read_text().endswith("    print('hi')\n\ndef other():\n    return 1\n")
    with pytest.raises(ToolError, match="both empty"):
        await call(space, "edit_file", path="src/app.py", old_text="", new_text="  ")


async def test_write_file_will_not_drop_the_functions_a_python_file_has(space: Path) -> None:
    with pytest.raises(ToolError, match=r"Not written: the new content of 'src/app\.py' leaves out main\(\)"):
        await call(space, "write_file", path="src/app.py", content="def count_words(text):\n    return {}\n")
    assert "def main" in (space / "src" / "app.py").read_text(), "the file is as it was"
    kept = "import os\n\ndef main():\n    print('bye')\n\ndef count_words(text):\n    return {}\n"
    assert await call(space, "write_file", path="src/app.py", content=kept) == "Wrote src/app.py (7 lines)."


async def test_an_old_text_that_is_the_new_functions_first_line_adds_the_function(space: Path) -> None:
    # the 1.5B model's way to add count_words: the new function's signature as old_text
    result = await call(
        space,
        "edit_file",
        path="src/app.py",
        old_text="def count_words(text: str) -> dict:",
        new_text="def count_words(text: str) -> dict:\n    return {}",
    )
    assert result.startswith("Added count_words() at the end of src/app.py: old_text is not in the file")
    assert (space / "src" / "app.py").read_text().endswith("\n\ndef count_words(text: str) -> dict:\n    return {}\n")
    with pytest.raises(ToolError, match="was not found"):  # a method does not belong at the end of the file
        await call(
            space, "edit_file", path="src/app.py", old_text="    def helper(self):", new_text="    def helper(self):"
        )
    with pytest.raises(ToolError, match="was not found"):  # main() exists: an edit of it that missed is an error
        await call(
            space, "edit_file", path="src/app.py", old_text="def main() -> None:", new_text="def main() -> None:\n"
        )


async def test_an_edit_that_left_out_the_docstring_keeps_it(space: Path) -> None:
    (space / "summary.py").write_text(
        "def average(values):\n"
        '    """The mean, or None when there are none."""\n'
        "    return sum(values) / len(values)\n\n\ndef spread(values):\n    return max(values) - min(values)\n"
    )
    # the 1.5B model's call: the docstring line left out of old_text and new_text
    result = await call(
        space,
        "edit_file",
        path="summary.py",
        old_text="def average(values):\n    return sum(values) / len(values)",
        new_text="def average(values):\n    return None if not values else sum(values) / len(values)",
    )
    assert "matched lines 1-3" in result
    assert (
        (space / "summary.py")
        .read_text()
        .startswith(
            'def average(values):\n    """The mean, or None when there are none."""\n'
            "    return None if not values else sum(values) / len(values)\n\n\ndef spread"
        )
    )
    with pytest.raises(ToolError, match="was not found"):  # a left-out line of code is not skipped
        await call(space, "edit_file", path="summary.py", old_text="def spread(values):\n    return 0", new_text="x")


async def test_an_edit_may_start_or_end_inside_a_line(space: Path) -> None:
    (space / "slug.py").write_text(
        'def slugify(title: str, sep: str = "_") -> str:\n    """Words joined by ``sep``."""\n    return sep\n'
    )
    # the 1.5B model's call: old_text starts after "def " and lost the docstring's quotes
    await call(
        space,
        "edit_file",
        path="slug.py",
        old_text="slugify(title: str, sep: str = '_') -> str:\n    Words joined by ``sep``.",
        new_text="slugify(title: str, sep: str = '-') -> str:\n    Words joined by ``sep``.",
    )
    assert (space / "slug.py").read_text() == (
        'def slugify(title: str, sep: str = \'-\') -> str:\n    """Words joined by ``sep``."""\n    return sep\n'
    )
    (space / "limits.py").write_text("TIMEOUT = 30  # seconds\nmax = 10\n")
    await call(space, "edit_file", path="limits.py", old_text="TIMEOUT = 30", new_text="TIMEOUT = 60")
    assert (space / "limits.py").read_text() == "TIMEOUT = 60  # seconds\nmax = 10\n", "exact, as ever"
    with pytest.raises(ToolError, match="was not found"):  # too short to match part of a line loosely
        await call(space, "edit_file", path="limits.py", old_text="ma = 1", new_text="ma = 2")


async def test_a_rename_says_where_the_old_name_still_is(space: Path) -> None:
    (space / "models.py").write_text("class UserRec:\n    pass\n")
    (space / "store.py").write_text("from models import UserRec\n\nusers: list[UserRec] = []\n")
    (space / "other.py").write_text("UserRecord = None  # another name\n")
    result = await call(space, "edit_file", path="models.py", old_text="class UserRec:", new_text="class UserRecord:")
    assert result == "Edited models.py. UserRec still appears in: store.py (2)."
    assert await call(space, "edit_file", path="notes.md", old_text="beta", new_text="BETA") == "Edited notes.md."


async def test_grep_searches_a_text_file_with_one_byte_that_is_not_utf8(tmp_path: Path) -> None:
    """Reported: grep_files skipped such a file silently."""
    (tmp_path / "notes.txt").write_bytes(b"caf\xe9 opens at 9\nPAYMENT_TERMS = 30\n")
    (tmp_path / "image.bin").write_bytes(b"\x89PNG\x00\x00PAYMENT_TERMS")
    grep = {t.name: t for t in builtin_tools(tmp_path)}["grep_files"]
    found = await grep.invoke(grep.validate({"pattern": "PAYMENT_TERMS"}))
    assert found == "notes.txt:2:PAYMENT_TERMS = 30"
    assert "caf\ufffd opens" in await grep.invoke(grep.validate({"pattern": "opens"}))

"""One home per fact (issue 47): each fact below is written once, and every place that needs it reads it there.

The bundled models are rows of the catalogue, the fix's defaults are cortana.yml's, the folders that are not
the project are one set that every walker skips, and a refused tool call says so in a typed field.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pathspec
import pytest

from cortana import Agent, Message, Settings, ThreadRef, tool
from cortana.agent.events import ToolCallFinished
from cortana.assistant import Assistant
from cortana.config import NOT_PROJECT_FOLDERS, NOT_THE_PROJECT, FixSettings, not_project_folders
from cortana.errors import ModelError, ModelNotFound
from cortana.knowledge.graph import skip_rules
from cortana.knowledge.search import PromptSearch
from cortana.learning.snapshot import WorkspaceSnapshot
from cortana.models import catalogue, embedded
from cortana.repair.run import RepairSettings, configured_fields
from cortana.repair.scratch import ScratchCopy
from cortana.repair.symbols import SymbolIndex
from cortana.sandbox.policy import Sandbox
from cortana.serve import ChatService
from cortana.serve.service import ChatInput, ToolActivity, TurnEnd
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools import Tool
from cortana.tools.builtin.files import WorkspaceFiles
from cortana.tools.builtin.workspace import ALWAYS_IGNORED, Workspace
from cortana.tools.permissions import PermissionDecision, PermissionGate
from tests.backends import Backend
from tests.fake_hub import tiny_model

ROOT = Path(__file__).resolve().parents[2]

# -- the bundled models -------------------------------------------------------------------------------------------


def test_the_bundled_models_are_the_catalogues_bundled_rows_best_first() -> None:
    bundled = [model for model in catalogue.CATALOGUE.values() if model.bundled]
    assert embedded.BUNDLED_MODELS is catalogue.BUNDLED_MODELS, "one table, not a copy"
    assert list(catalogue.BUNDLED_MODELS.values()) == sorted(bundled, key=lambda model: -model.size)
    assert list(catalogue.BUNDLED_MODELS) == ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"], "the 1.5B is the default"
    for model in bundled:
        assert model.repo is None and model.file and model.file.endswith(".gguf") and model.sha256
        assert model.extra and model.distributions and model.check_margin is not None


def test_each_bundled_rows_packages_are_what_its_extra_installs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def requirements(extra: str) -> list[str]:  # an extra's, with those of the extras it names (cortana[...])
        found = []
        for requirement in extras[extra]:
            if requirement.startswith("cortana["):
                found += [item for name in requirement[8:-1].split(",") for item in requirements(name)]
            else:
                found.append(requirement)
        return found

    for model in catalogue.BUNDLED_MODELS.values():
        assert model.extra is not None
        pinned = [requirement.split("==")[0] for requirement in requirements(model.extra) if "==" in requirement]
        assert pinned == list(model.distributions), f"pyproject's [{model.extra}] against {model.name}'s row"


def test_one_resolver_turns_every_kind_of_name_into_a_file(tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(tiny_model())
    assert embedded.resolve_model_path(str(gguf)) == ("mine", gguf)
    gguf.write_bytes(b"GGUF")  # the file is read before anything loads it
    with pytest.raises(ModelError, match=r"mine\.gguf cannot run on the embedded engine: .*header ends early"):
        embedded.resolve_model_path(str(gguf))
    with pytest.raises(ModelNotFound, match=r"not downloaded yet: run `cortana models pull qwen2\.5-coder-7b`"):
        embedded.resolve_model_path("qwen2.5-coder-7b")
    with pytest.raises(ModelNotFound, match=r"Did you mean qwen2\.5-coder-0\.5b.*the path of a \.gguf file"):
        embedded.resolve_model_path("qwen2.5-coder-0.5")
    with pytest.raises(ModelNotFound, match="is not a bundled model"):
        embedded.ensure_model_file("qwen2.5-coder-7b")


# -- the fix's settings -------------------------------------------------------------------------------------------


def test_the_fix_settings_have_one_default_each() -> None:
    assert set(configured_fields()) == {
        "budget_seconds",
        "samples",
        "per_location",
        "mutants",
        "rewrite_lines",
        "rewrite",
        "rounds",
        "test_timeout",
    }
    assert RepairSettings.from_config(FixSettings()) == RepairSettings(), "cortana.yml's defaults are the workflow's"
    changed = FixSettings(budget_seconds=60, samples=2, rewrite=False)
    chosen = RepairSettings.from_config(changed, seed=7)
    assert (chosen.budget_seconds, chosen.samples, chosen.rewrite, chosen.seed) == (60, 2, False, 7)


# -- the folders that are not the project -------------------------------------------------------------------------

HIDDEN = {
    name: f"only_in_{index}_{name.strip('.').replace('-', '_')}"
    for index, name in enumerate(sorted(NOT_PROJECT_FOLDERS))
}
"""A word per folder that is not the project, written only in a file inside it."""
SEEN = "only_in_the_project"


def _project(root: Path, folders: set[str]) -> None:
    """``root`` with a file of the project, and in each folder of ``folders`` (at the top and one level down) a file
    whose word no walker may see."""
    (root / "app.py").write_text(f"def {SEEN}():\n    return 1\n")
    for name in folders:
        for folder in (root / name, root / "pkg" / name):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "inside.py").write_text(f"def {HIDDEN[name]}():\n    return 1\n")


def _all_text(root: Path) -> str:
    return "\n".join(f"{path}\n{path.read_text()}" for path in sorted(root.rglob("*.py")))


def _list_files(root: Path) -> str:
    files = WorkspaceFiles(Workspace(root, sandbox=False))
    return (
        files.list_files(".") + "\n" + "\n".join(files.read_file(line) for line in files.list_files(".").splitlines())
    )


def _grep_files(root: Path) -> str:
    return WorkspaceFiles(Workspace(root, sandbox=False)).grep_files("only_in_")


def _prompt_search(root: Path) -> str:
    hits = PromptSearch(Workspace(root, sandbox=False), max_lines=500).search(["only_in"])
    return "\n".join(f"{hit.path}: {hit.text}" for hit in hits)


def _graph(root: Path) -> str:
    """What graphify reads: every file its ignore block (the rules :func:`skip_rules` writes) lets through."""
    block = pathspec.GitIgnoreSpec.from_lines(pattern for _, pattern in skip_rules(root))
    kept = [path for path in sorted(root.rglob("*.py")) if not block.match_file(path.relative_to(root).as_posix())]
    return "\n".join(path.read_text() for path in kept)


def _scratch_copy(root: Path) -> str:
    with ScratchCopy(root, dict(os.environ), Sandbox(root, enabled=False)) as copy:
        return _all_text(copy.root)


def _scratch_copy_of_a_repository(root: Path) -> str:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-f", "-A"], check=True, capture_output=True)  # tracked, however ignored
    return _scratch_copy(root)


def _symbol_index(root: Path) -> str:
    return "\n".join(symbol.name for symbol in SymbolIndex.build(root).symbols)


def _teach_snapshot(root: Path) -> str:
    snapshot = WorkspaceSnapshot(root, Sandbox(root, enabled=False))
    for path in root.rglob("*.py"):
        path.write_text(path.read_text() + "# changed\n")
    return "\n".join(change.path + "\n" + change.diff for change in snapshot.changes())


WALKERS: dict[str, Callable[[Path], str]] = {
    "list_files": _list_files,
    "grep_files": _grep_files,
    "prompt search": _prompt_search,
    "code graph": _graph,
    "scratch copy": _scratch_copy,
    "scratch copy in git": _scratch_copy_of_a_repository,
    "symbol index": _symbol_index,
    "teach snapshot": _teach_snapshot,
}


@pytest.mark.parametrize("walker", list(WALKERS))
def test_every_walker_skips_the_same_folders_that_are_not_the_project(walker: str, tmp_path: Path) -> None:
    folders = set(NOT_PROJECT_FOLDERS)
    if walker == "scratch copy in git":
        if shutil.which("git") is None:
            pytest.skip("git is not installed")
        folders.discard(".git")  # git keeps its own folder out of every list
    _project(tmp_path, folders)
    seen = WALKERS[walker](tmp_path)
    assert SEEN in seen, f"{walker} sees the project's own file"
    entered = sorted(name for name in folders if HIDDEN[name] in seen)
    assert not entered, f"{walker} entered {entered}"


def test_the_folders_that_are_not_the_project_are_one_table() -> None:
    assert ALWAYS_IGNORED == NOT_PROJECT_FOLDERS == {name for names in NOT_THE_PROJECT.values() for name in names}
    assert not_project_folders({"GRAPHIFY_OUT": "graph-here"}) == NOT_PROJECT_FOLDERS | {"graph-here"}
    assert not_project_folders({"GRAPHIFY_OUT": "/elsewhere/graph"}) == NOT_PROJECT_FOLDERS


# -- refusals -----------------------------------------------------------------------------------------------------


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("a refused call never runs")


@tool
def explode(path: str) -> str:
    """Fail."""
    raise RuntimeError("boom")


class _NoHook:
    async def before_tool(self, call: Any, tool: Tool) -> str | None:
        return "a hook of the user's keeps deletions out" if tool.name == "delete_file" else None

    async def after_tool(self, call: Any, tool: Tool, result: Message) -> str | None:
        return None


async def _finished(unattended: bool = False, **agent: Any) -> tuple[ToolCallFinished, ScriptedModel]:
    model = ScriptedModel([tool_call_response(tool_call("delete_file", path="a.txt")), "I did not delete it."])
    run = Agent(model, tools=[delete_file], **agent).run_stream("delete a.txt", unattended=unattended)
    events = [event async for event in run]
    [finished] = [event for event in events if isinstance(event, ToolCallFinished)]
    return finished, model


def _declining(call: Any, tool: Tool, reason: str | None) -> PermissionDecision:
    return PermissionDecision.deny("words that name no refusal")


@pytest.mark.parametrize(
    ("agent", "refusal"),
    [
        ({"permissions": PermissionGate(rules={"delete_*": "deny"})}, "policy"),
        ({"permissions": PermissionGate(check=lambda call, tool, context: PermissionDecision.deny("no"))}, "policy"),
        ({"permissions": PermissionGate(default="ask", approve=_declining)}, "approval"),
        ({"permissions": PermissionGate(default="ask")}, "approval"),  # nobody to ask
        ({"permissions": PermissionGate(default="ask", approve=lambda *_: True), "unattended": True}, "approval"),
        ({"tool_hooks": _NoHook()}, "hook"),
    ],
    ids=["rule", "check", "declined", "no approver", "unattended", "hook"],
)
async def test_a_refused_call_says_so_in_a_typed_field_not_only_in_words(agent: dict[str, Any], refusal: str) -> None:
    finished, model = await _finished(**agent)
    assert finished.refused and finished.is_error and finished.result.refusal == refusal
    assert finished.result.content.startswith("Permission denied for 'delete_file': ")
    assert len(model.requests) == 2, "a refusal is not the model's mistake: no retry of the failed round"


async def test_a_call_that_ran_and_failed_is_not_a_refusal() -> None:
    model = ScriptedModel([tool_call_response(tool_call("explode", path="a")), "It broke.", "It broke."])
    events = [event async for event in Agent(model, tools=[explode]).run_stream("go")]
    [finished] = [event for event in events if isinstance(event, ToolCallFinished)]
    assert finished.is_error and not finished.refused and finished.result.refusal is None


async def test_a_refusal_is_kept_in_memory_and_a_plain_message_stores_no_field(tmp_path: Path) -> None:
    call = tool_call("delete_file", path="a.txt")
    refused = Message.tool(call, "no", is_error=True).model_copy(update={"refusal": "approval"})
    assert "refusal" not in Message.tool(call, "done").model_dump_json(exclude_defaults=True)
    backend = Backend("sqlite", tmp_path)
    memory = backend.make()
    try:
        thread = ThreadRef(resource_id="me", thread_id="t")
        await memory.append_messages(thread, [Message.user("x"), refused])
        assert [stored.message for stored in await memory.messages(thread)][-1] == refused
    finally:
        backend.close()


async def test_the_server_knows_a_refused_approval_by_its_field_whatever_the_reason_says(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call_response(tool_call("write_file", path="out.txt", content="x")), "Not written."])
    settings = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})

    def in_other_words(call: Any, tool: Tool, reason: str | None = None, scope: Any = None) -> PermissionDecision:
        return PermissionDecision.deny("the operator keeps this server read-only")

    assistant = Assistant(tmp_path, settings, client=model, approve=in_other_words, heartbeat=False)
    service = ChatService(assistant)
    try:
        pieces = [piece async for piece in service.begin(ChatInput("write out.txt"))]
    finally:
        service.close()
        await assistant.aclose()
    [result] = [piece for piece in pieces if isinstance(piece, ToolActivity) and piece.kind == "tool_result"]
    [end] = [piece for piece in pieces if isinstance(piece, TurnEnd)]
    assert result.refused and not result.ok and end.refused == ("write_file",)
    assert "Not done: write_file needed an approval" in end.shown
    assert not (tmp_path / "out.txt").exists()

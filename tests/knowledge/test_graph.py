"""KnowledgeGraph on the real graphify CLI: per-turn context, tools, rebuilds, excludes, a missing CLI."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path

import pytest

from cortana import Agent, ThreadRef
from cortana.errors import ToolError, UserError
from cortana.knowledge import KnowledgeGraph
from cortana.knowledge.graph import graph_tools
from cortana.knowledge.graphify import BLOCK_BEGIN, BLOCK_END, read_ignore_block, write_ignore_block
from cortana.sandbox import Sandbox
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools.builtin import builtin_tools
from tests.knowledge.conftest import line_of

T = ThreadRef(resource_id="me", thread_id="t")


def no_processes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Record (and refuse) every process the code under test tries to start."""
    started: list[tuple[object, ...]] = []

    async def refuse(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(asyncio, "create_subprocess_exec", refuse)
    return started


# -- per-turn context ------------------------------------------------------------------------------


async def test_a_prompt_naming_a_function_gets_its_place_and_callers(project: Path) -> None:
    graph = KnowledgeGraph(project)
    block = await graph.context(T, "What calls `load_defaults`?")
    assert block is not None
    defined = line_of(project / "shop/registry.py", "def load_")
    called = line_of(project / "shop/app.py", "load_defaults(r")
    assert f"load_defaults() — function at shop/registry.py:{defined}" in block
    assert f"called by: build_app() at shop/app.py:{called}" in block
    assert "doc: Register the skills every shop has." in block
    await graph.aclose()


async def test_hi_costs_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = KnowledgeGraph(project)
    started = no_processes(monkeypatch)
    for prompt in ("hi", "Can you run the tests and register me?", "What depends on Catalog?"):
        assert await graph.context(T, prompt) is None
    assert started == [] and graph.cli_runs == 0
    assert graph.index is None  # nothing was loaded either


async def test_a_name_loads_the_existing_graph_without_waiting_for_graphify(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = KnowledgeGraph(project, auto_rebuild=False)
    graph._refreshed = True  # the once-per-session refresh would start graphify; this test is about the lookup
    started = no_processes(monkeypatch)
    assert "class at shop/catalog.py" in (await graph.context(T, "What does `Catalog` hold?") or "")
    assert started == []
    # once the graph is in memory, a capitalised word inside a sentence is looked up as a class
    assert "class at shop/catalog.py" in (await graph.context(T, "What depends on Catalog?") or "")
    assert await graph.context(T, "What depends on Paris?") is None


async def test_a_name_with_two_definitions_lists_both(project: Path) -> None:
    graph = KnowledgeGraph(project)
    block = await graph.context(T, "what does `lookup` do?") or ""
    assert "'lookup' has 2 definitions" in block
    assert "shop/registry.py:" in block and "shop/catalog.py:" in block
    await graph.aclose()


async def test_a_name_in_a_javascript_file(project: Path) -> None:
    graph = KnowledgeGraph(project)
    block = await graph.context(T, "who uses formatName?") or ""
    assert "formatName() — function at web/format.js:1" in block and "called by: greet()" in block
    await graph.aclose()


async def test_report_mode_adds_the_report_once_per_thread(project: Path) -> None:
    graph = KnowledgeGraph(project, context="report")
    first = await graph.context(T, "hi") or ""
    assert first.startswith("Code graph report (graphify):") and "nodes" in first
    assert await graph.context(T, "hi again") is None
    assert await graph.context(ThreadRef(thread_id="other"), "hi") is not None
    await graph.aclose()


async def test_off_mode_adds_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = KnowledgeGraph(project, context="off")
    no_processes(monkeypatch)
    assert await graph.context(T, "What calls `load_defaults`?") is None


def test_bad_arguments_are_clear(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="context must be one of lookup, report, both, off"):
        KnowledgeGraph(tmp_path, context="all")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="is not one"):
        KnowledgeGraph(tmp_path / "missing")
    with pytest.raises(UserError, match="one line"):
        KnowledgeGraph(tmp_path, exclude=["a\nb"])


# -- the tools -------------------------------------------------------------------------------------


@pytest.fixture
async def tools(project: Path) -> dict[str, object]:
    graph = KnowledgeGraph(project)
    await graph.ensure()
    yield {tool.name: tool for tool in graph_tools(graph)}
    await graph.aclose()


async def call(tools: dict[str, object], tool_name: str, /, **arguments: object) -> str:
    tool = tools[tool_name]
    return str(await tool.function(**arguments))  # type: ignore[attr-defined]


async def test_the_tools_have_the_seeds_names_and_all_but_update_only_read(project: Path) -> None:
    graph = KnowledgeGraph(project)
    (group,) = graph.tools(T)
    assert [tool.name for tool in group.tools] == [
        "query_knowledge_graph",
        "explain_graph_node",
        "graph_path",
        "graph_affected",
        "graph_god_nodes",
        "update_knowledge_graph",
    ]
    assert [tool.read_only for tool in group.tools] == [True] * 5 + [False]
    assert not group.eager and KnowledgeGraph(project, eager_tools=True).tools(T)[0].eager  # type: ignore[union-attr]


async def test_query_shows_the_neighbourhood_with_sources(tools: dict[str, object]) -> None:
    text = await call(tools, "query_knowledge_graph", question="how does build_app use SkillRegistry?")
    assert text.startswith("Start: build_app() (shop/app.py:")
    assert "build_app() --calls--> SkillRegistry  at shop/app.py:8" in text
    missing = await call(tools, "query_knowledge_graph", question="where is load_default defined?")
    assert "Nothing in the question names a node" in missing and "load_defaults()" in missing


async def test_explain_a_node_an_ambiguous_one_and_an_unknown_one(tools: dict[str, object]) -> None:
    text = await call(tools, "explain_graph_node", name="SkillRegistry")
    assert text.startswith("SkillRegistry — class at shop/registry.py:4")
    assert ".register() at shop/registry.py:10" in text and "called by: build_app() at shop/app.py:8" in text
    assert "2 definitions" in await call(tools, "explain_graph_node", name="lookup")
    assert "Closest: load_defaults()" in await call(tools, "explain_graph_node", name="load_default")


async def test_path_affected_and_god_nodes(tools: dict[str, object]) -> None:
    path = await call(tools, "graph_path", source="run", target="load_defaults")
    assert "2 step(s)" in path and "run() --calls--> build_app()" in path
    affected = await call(tools, "graph_affected", name="price_total")
    assert "[1] checkout() (function) calls at shop/app.py:15" in affected
    assert "[2] run() (function) calls at shop/app.py:20" in affected
    gods = await call(tools, "graph_god_nodes", top=2)
    assert "1. Catalog — class at shop/catalog.py:4" in gods or "1. SkillRegistry — class" in gods
    with pytest.raises(ToolError, match="2 definitions"):
        await call(tools, "graph_affected", name="lookup")


async def test_update_rebuilds_and_says_what_changed(project: Path, tools: dict[str, object]) -> None:
    (project / "shop" / "extra.py").write_text("def added_later():\n    return 1\n")
    text = await call(tools, "update_knowledge_graph")
    assert text.startswith("Code graph rebuilt (+") and "ready:" in text


# -- rebuilds --------------------------------------------------------------------------------------


async def test_an_edit_through_edit_file_rebuilds_and_the_new_function_is_found(project: Path) -> None:
    graph = KnowledgeGraph(project)
    await graph.ensure()
    await graph.wait_idle()
    assert graph.index is not None and not graph.index.find("apply_discount")
    edit = tool_call(
        "edit_file",
        path="shop/catalog.py",
        old_text="def price_total(",
        new_text="def apply_discount(total):\n    return total * 0.9\n\n\ndef price_total(",
    )
    agent = Agent(
        ScriptedModel([tool_call_response(edit), "Added it."]), tools=builtin_tools(project), knowledge_graph=graph
    )
    result = await agent.run("Add apply_discount to catalog.py")
    assert result.changed_by == ["edit_file"]
    await agent.aclose()  # waits for the background rebuild
    (node,) = graph.index.find("apply_discount")
    assert node.where == "shop/catalog.py:17"
    assert graph.status().state == "ready"


@pytest.fixture
def gated(tmp_path: Path, graphify: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path, Path]:
    """A graphify that waits for a gate file before it runs, and logs when each run starts and ends."""
    gate, log = tmp_path / "gate", tmp_path / "runs.log"
    script = tmp_path / "slow-graphify"
    script.write_text(
        "#!/bin/sh\n"
        f'echo start >> "{log}"\n'
        f'while [ ! -e "{gate}" ]; do sleep 0.05; done\n'
        f'"{graphify}" "$@"\nstatus=$?\n'
        f'echo end >> "{log}"\nexit $status\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), gate, log


async def test_the_turn_never_waits_queries_use_the_old_graph_and_rebuilds_never_overlap(
    project: Path, gated: tuple[str, Path, Path]
) -> None:
    command, gate, log = gated
    graph = KnowledgeGraph(project, command=command, sandbox=Sandbox(project, enabled=False))  # its log is outside
    graph._refreshed = True  # no refresh of the existing graph: this test counts runs
    await graph.ensure()  # loads graph.json; graphify is not needed for that
    write = tool_call("write_file", path="shop/late.py", content="def arrived_late():\n    return 2\n")
    agent = Agent(
        ScriptedModel([tool_call_response(write), "Wrote it."]), tools=builtin_tools(project), knowledge_graph=graph
    )
    result = await agent.run("Write late.py")  # returns although graphify is held at the gate
    assert result.output == "Wrote it."
    for _ in range(100):
        if graph.rebuilding:
            break
        await asyncio.sleep(0.02)
    assert graph.rebuilding and graph.status().state == "building"
    assert graph.index is not None and not graph.index.find("arrived_late")  # the previous graph serves
    assert "class at shop/catalog.py" in (await graph.context(T, "What is `Catalog`?") or "")
    graph.request_rebuild()
    graph.request_rebuild()  # two requests during a run queue one more run, not two
    gate.touch()
    await agent.aclose()
    await graph.wait_idle()
    assert log.read_text().split() == ["start", "end", "start", "end"]
    assert graph.cli_runs == 2
    assert graph.index.find("arrived_late")


async def test_a_turn_that_only_reads_does_not_rebuild(project: Path) -> None:
    graph = KnowledgeGraph(project)
    graph._refreshed = True
    read = tool_call("read_file", path="shop/app.py")
    model = ScriptedModel([tool_call_response(read), "Read."])
    agent = Agent(model, tools=builtin_tools(project), knowledge_graph=graph)
    result = await agent.run("Read app.py")
    await agent.aclose()
    assert result.changed_by == [] and graph.cli_runs == 0


async def test_a_failed_rebuild_keeps_the_previous_graph_and_says_stale(project: Path, tmp_path: Path) -> None:
    failing = tmp_path / "failing-graphify"
    failing.write_text("#!/bin/sh\necho 'boom: tree-sitter crashed' >&2\nexit 1\n")
    failing.chmod(0o755)
    graph = KnowledgeGraph(project, command=str(failing))
    await graph.ensure()
    status = await graph.rebuild()
    assert status.state == "stale" and "boom: tree-sitter crashed" in (status.last_error or "")
    assert graph.index is not None and graph.index.find("Catalog")


# -- .graphifyignore -------------------------------------------------------------------------------


def test_the_managed_block_round_trips_and_leaves_the_users_lines_alone(tmp_path: Path) -> None:
    ignore = tmp_path / ".graphifyignore"
    ignore.write_text("# mine\nbuild/\n")
    assert write_ignore_block(tmp_path, ["vendor/", "*.gen.py"])
    assert ignore.read_text() == f"# mine\nbuild/\n{BLOCK_BEGIN}\nvendor/\n*.gen.py\n{BLOCK_END}\n"
    assert not write_ignore_block(tmp_path, ["vendor/", "*.gen.py"])  # unchanged: not rewritten
    ignore.write_text(ignore.read_text() + "docs/\n")  # the user adds a line after the block
    assert write_ignore_block(tmp_path, ["third_party/"])
    assert ignore.read_text() == f"# mine\nbuild/\n{BLOCK_BEGIN}\nthird_party/\n{BLOCK_END}\ndocs/\n"
    assert read_ignore_block(tmp_path) == ["third_party/"]
    assert write_ignore_block(tmp_path, [])
    assert ignore.read_text() == "# mine\nbuild/\ndocs/\n"


def test_a_block_alone_goes_with_its_file(tmp_path: Path) -> None:
    assert write_ignore_block(tmp_path, ["vendor/"])
    assert write_ignore_block(tmp_path, [])
    assert not (tmp_path / ".graphifyignore").exists()
    assert not write_ignore_block(tmp_path, [])


def test_a_symlinked_ignore_file_is_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / ".graphifyignore")
    with pytest.raises(UserError, match="symbolic link"):
        write_ignore_block(root, ["vendor/"])
    assert outside.read_text() == "precious\n"


async def test_excluded_folders_stay_out_of_the_graph(fresh: Path) -> None:
    graph = KnowledgeGraph(fresh, exclude=["vendor/"])
    await graph.ensure()
    assert graph.index is not None
    assert graph.index.find("price_total") and not graph.index.find("vendored_helper")
    block = read_ignore_block(fresh)
    assert block[0] == "vendor/", "the user's patterns first"
    assert {"node_modules/", "*.min.js", "*_pb2.py"} <= set(block), "then what is left out by rule"


# -- without graphify ------------------------------------------------------------------------------


async def test_without_the_cli_the_agent_runs_without_the_graph(
    fresh: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = KnowledgeGraph(fresh, command="no-such-graphify-here")
    started = no_processes(monkeypatch)
    agent = Agent(ScriptedModel(["Fine."]), knowledge_graph=graph)
    with caplog.at_level(logging.WARNING, logger="cortana.knowledge"):
        result = await agent.run("What calls `load_defaults`?")
        assert graph.tools(T) == () and await graph.context(T, "`load_defaults`") is None
    assert result.output == "Fine."
    assert started == []
    warnings = [r for r in caplog.records if "graphify is not installed" in r.getMessage()]
    assert len(warnings) == 1 and "pip install 'cortana[graph]'" in warnings[0].getMessage()
    assert graph.status().state == "unavailable"
    assert "<context>" not in agent.model.requests[0].messages[-1].content  # type: ignore[union-attr]
    await agent.aclose()


# -- starting up, folders without code, configuration -------------------------------------------------


async def test_start_builds_a_missing_graph_in_the_background(fresh: Path) -> None:
    graph = KnowledgeGraph(fresh)
    graph.start()
    assert graph.rebuilding and graph.status().state == "building"
    assert await graph.context(T, "What calls `load_defaults`?")  # waits for the build in progress, no second one
    await graph.wait_idle()
    assert graph.cli_runs == 1 and graph.status().state == "ready"


async def test_start_serves_an_earlier_graph_while_it_is_refreshed_once(project: Path) -> None:
    graph = KnowledgeGraph(project)
    graph.start()
    await graph.wait_idle()
    await graph.context(T, "What calls `load_defaults`?")
    await graph.wait_idle()
    assert graph.cli_runs == 1 and graph.index is not None


async def test_a_folder_without_code_is_no_error_and_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("groceries\n")
    graph = KnowledgeGraph(tmp_path)
    assert await graph.context(T, "What is `load_defaults`?") is None
    status = graph.status()
    assert status.state == "no code" and status.last_error is None
    assert not (tmp_path / "graphify-out").exists()
    assert await graph.context(T, "and `build_app`?") is None
    assert graph.cli_runs == 1  # not retried until a turn changes files


def test_graphify_settings_are_checked_naming_the_key(tmp_path: Path) -> None:
    from cortana.config import load_settings
    from cortana.errors import ConfigError

    (tmp_path / "cortana.yml").write_text("graphify:\n  context: everything\n")
    with pytest.raises(ConfigError, match=r"graphify\.context.*'lookup', 'report', 'both' or 'off'"):
        load_settings(tmp_path, environ={})
    (tmp_path / "cortana.yml").write_text("graphify:\n  exclude: ['']\n")
    with pytest.raises(ConfigError, match=r"graphify\.exclude.*one non-empty line"):
        load_settings(tmp_path, environ={})
    (tmp_path / "cortana.yml").write_text("graphify:\n  enable: false\n")
    with pytest.raises(ConfigError, match=r"graphify\.enable"):
        load_settings(tmp_path, environ={})
    (tmp_path / "cortana.yml").write_text("graphify:\n  enabled: false\n  exclude: [vendor/]\n")
    settings = load_settings(tmp_path, environ={})
    assert not settings.graphify.enabled and settings.graphify.exclude == ["vendor/"]


async def test_a_failed_first_build_is_not_retried_every_turn(fresh: Path, tmp_path: Path) -> None:
    failing = tmp_path / "failing-graphify"
    failing.write_text("#!/bin/sh\necho 'boom' >&2\nexit 1\n")
    failing.chmod(0o755)
    graph = KnowledgeGraph(fresh, command=str(failing))
    assert await graph.context(T, "What is `load_defaults`?") is None
    assert await graph.context(T, "and `build_app`?") is None
    assert graph.cli_runs == 1 and graph.status().state == "failed"
    await graph.rebuild()  # asked for: tried again
    assert graph.cli_runs == 2


STATUS_ELSEWHERE = (
    "import sys; from pathlib import Path; from cortana.knowledge import KnowledgeGraph; "
    "print(KnowledgeGraph(Path(sys.argv[1])).status().summary())"
)


def status_from_another_process(folder: Path) -> str:
    """What ``cortana doctor`` would say of ``folder``'s graph: a new process, which loads nothing."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", STATUS_ELSEWHERE, str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_another_process_sees_a_first_build_under_way_then_the_built_graph(
    fresh: Path, gated: tuple[str, Path, Path]
) -> None:
    from cortana.knowledge.built import BuildRecords

    command, gate, _ = gated
    graph = KnowledgeGraph(fresh, command=command)
    graph.start()  # held at the gate: the first build is under way
    records = BuildRecords(fresh)
    for _ in range(100):
        if records.building_since(own=True) is not None:
            break
        await asyncio.sleep(0.02)
    seen = await asyncio.to_thread(status_from_another_process, fresh)
    assert seen.startswith("building: another Cortana process is building it for the first time (started "), seen
    gate.touch()
    await graph.wait_idle()
    assert not records.building_file.exists(), "the build's note goes with it"
    seen = await asyncio.to_thread(status_from_another_process, fresh)
    assert seen.startswith("ready: graph.json built ") and seen.endswith(" ago (not loaded yet)"), seen


def test_a_build_note_left_by_a_process_that_died_is_no_build(fresh: Path) -> None:
    import json
    import subprocess

    from cortana.knowledge.built import BuildRecords

    records = BuildRecords(fresh)
    dead = subprocess.Popen(["true"])  # a process that has exited
    dead.wait()
    records.building_file.write_text(json.dumps({"pid": dead.pid, "started": 1.0}))
    assert records.building_since() is None and KnowledgeGraph(fresh).status().state != "building"


# -- a big folder never holds a turn ------------------------------------------------------------------------


def generated_module(kib: int) -> str:
    """Python of about ``kib`` KiB: many small handlers, as a code generator writes them."""
    lines, size, index = [], 0, 0
    while size < kib << 10:
        line = f"def handler_{index}(request, value):\n    return helper_{index % 50}(request) + value * {index}\n"
        lines.append(line)
        size += len(line)
        index += 1
    return "".join(lines)


async def test_a_turn_waits_a_moment_for_a_first_build_and_goes_on_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported: the first question naming code waited for graphify's first build (0.7 MiB: 127 s)."""
    from cortana.knowledge import graph as graph_module

    (tmp_path / "app.py").write_text("def price_total(items):\n    return sum(items)\n")
    (tmp_path / "handlers.py").write_text(generated_module(200))  # under the size rule: graphify parses it
    monkeypatch.setattr(graph_module, "TURN_WAIT_S", 0.05)  # shorter than any real build, so the test is not a race
    graph = KnowledgeGraph(tmp_path)
    block = await graph.context(T, "What does price_total do?")
    assert block is None and graph.index is None, "the turn went on without the graph"
    assert graph.status().state == "building"
    await graph.wait_idle()
    block = await graph.context(T, "What does price_total do?")
    assert block is not None and "price_total" in block, "a later turn finds it ready"
    assert graph.cli_runs == 1, "one build, not one per turn"


async def test_generated_vendored_and_huge_files_are_left_out_by_a_named_rule(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def price_total(items):\n    return sum(items)\n")
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "big_handlers.py").write_text(generated_module(700))
    (tmp_path / "node_modules" / "left").mkdir(parents=True)
    (tmp_path / "node_modules" / "left" / "index.js").write_text("function leftPad(s) { return s; }\n")
    (tmp_path / "api_pb2.py").write_text("def SerializeToString():\n    return b''\n")
    graph = KnowledgeGraph(tmp_path)
    index = await graph.ensure()
    assert index is not None and index.find("price_total")
    assert not index.find("handler_7") and not index.find("leftPad") and not index.find("SerializeToString")
    skipped = graph.status().skipped
    assert "over 256 KiB: /gen/big_handlers.py" in skipped
    assert "installed packages: node_modules/" in skipped and "generated: *_pb2.py" in skipped
    assert "/gen/big_handlers.py" in read_ignore_block(tmp_path)


def test_a_graph_over_the_size_bound_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortana.knowledge import index as index_module
    from cortana.knowledge.index import GraphIndex

    monkeypatch.setattr(index_module, "MAX_GRAPH_BYTES", 1 << 20)
    big = tmp_path / "graph.json"
    big.write_text('{"nodes": [' + ",".join(f'{{"id": "n{i}", "label": "n{i}"}}' for i in range(60_000)) + "]}")
    with pytest.raises(UserError, match=r"MiB; Cortana loads code graphs up to 1 MiB\. Leave out .* graphify\.exclude"):
        GraphIndex.load(big)


def test_the_missing_cli_warning_shows_a_hostile_folder_name_as_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder's name is anyone's: the warning that graphify is missing must not carry a terminal's escapes."""
    folder = tmp_path / "proj\x1b]0;owned\x07\x1b[2J"
    folder.mkdir()
    graph = KnowledgeGraph(folder, command="no-such-graphify-here")
    with caplog.at_level(logging.WARNING, logger="cortana.knowledge"):
        assert not graph.available
    (warning,) = [r.getMessage() for r in caplog.records if "graphify is not installed" in r.getMessage()]
    assert "\x1b" not in warning and "\x07" not in warning and "proj" in warning

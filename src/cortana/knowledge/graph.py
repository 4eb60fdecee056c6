"""``KnowledgeGraph``: the agent knows the workspace's code through a graphify graph.

    graph = KnowledgeGraph("path/to/project", exclude=["vendor/"])
    agent = Agent(name="dev", instructions="You are a coding assistant.", knowledge_graph=graph)
    result = await agent.generate("What depends on SkillRegistry?")
    await graph.aclose()

It is a turn extension (``cortana.agent.extensions``) with three parts:

- **Per-turn context.** The names a prompt mentions (``names.py`` says what
  counts) are looked up in the loaded graph and described with ``file:line``
  sources: what each is, where it lives, its callers, callees, users and
  community. A prompt without names costs nothing: no process, no load.
- **Tools** (a group the model loads on demand, or eager): ``query_knowledge_graph``,
  ``explain_graph_node``, ``graph_path``, ``graph_affected``, ``graph_god_nodes``
  (read-only, so the repeated-read cache covers them) and ``update_knowledge_graph``.
- **Rebuilds.** After a turn in which a tool that is not read-only ran (a write,
  an edit, a command), ``graphify update`` runs in the background; the turn
  never waits, queries meanwhile use the previous graph, and rebuilds never
  overlap (a change during one queues exactly one more).

Without the graphify CLI the graph says so once (a warning on the
``cortana.knowledge`` logger) and adds nothing: no tools, no context, no error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Literal, Self, get_args

from cortana.agent.extensions import TurnExtension
from cortana.config import BUILD_OUTPUT_FOLDERS, NOT_THE_PROJECT
from cortana.display import printable
from cortana.errors import ToolError, UserError
from cortana.knowledge.built import BuildRecords
from cortana.knowledge.describe import (
    describe_affected,
    describe_god_nodes,
    describe_path,
    describe_query,
    describe_resolution,
)
from cortana.knowledge.graphify import (
    IGNORE_FILE,
    INSTALL_HINT,
    UpdateOutcome,
    check_patterns,
    find_graphify,
    graph_json,
    read_regular_file,
    run_update,
    write_ignore_block,
)
from cortana.knowledge.index import GraphIndex, Node, Resolution
from cortana.knowledge.names import Names, names_in
from cortana.messages import RunResult, ThreadRef
from cortana.safegit import exclude_from_git
from cortana.sandbox.policy import Sandbox
from cortana.tools import Tool, ToolGroup

__all__ = ["ContextMode", "GraphStatus", "KnowledgeGraph"]

log = logging.getLogger("cortana.knowledge")

ContextMode = Literal["lookup", "report", "both", "off"]
CONTEXT_MODES: tuple[str, ...] = get_args(ContextMode)
MAX_LOOKUPS = 4
"""The most names one turn's context describes."""
MAX_REPORT_CHARS = 2_000
TOOL_GROUP = "code_graph"
REPORT_FILE = "GRAPH_REPORT.md"


TURN_WAIT_S = 1.0
"""The longest a turn waits for the graph to be ready (a first build runs on behind it)."""
TOOL_WAIT_S = 5.0
"""The longest a graph tool waits for the graph before it says the graph is still being built."""
MAX_SOURCE_BYTES = 256 << 10
"""A code file larger than this is left out of the graph (it is generated or bundled, and slow to parse)."""
MAX_FILES_LOOKED_AT = 50_000
MAX_BIG_FILES = 200
CODE_SUFFIXES = frozenset(
    {
        *(".py", ".pyi", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".rs", ".java", ".kt"),
        *(".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".lua"),
    }
)
"""The file kinds whose size is checked (graphify parses them; other files cost it nothing)."""
SKIPPED_BY_NAME: dict[str, tuple[str, ...]] = {
    **{rule: tuple(f"{name}/" for name in names) for rule, names in NOT_THE_PROJECT.items()},
    "vendored": ("vendor/", "third_party/"),
    "generated": ("*.min.js", "*.min.css", "*.bundle.js", "*_pb2.py", "*_pb2_grpc.py", "*.pb.go", "*.generated.*"),
    "build output": tuple(f"{name}/" for name in sorted(BUILD_OUTPUT_FOLDERS)),
}
"""Folders and files graphify leaves out by name, by rule: the folders that are not the project
(``cortana.config.NOT_THE_PROJECT``), and what is code but not the project's to map (vendored copies, generated
files, build output)."""


@dataclass(frozen=True, slots=True)
class GraphStatus:
    """Where the graph stands (``/graph`` in the assistant shows it).

    Attributes:
        state: ``unavailable`` (no graphify CLI), ``not built``, ``building``, ``ready``,
            ``stale`` (files changed or the last rebuild failed; the previous graph serves),
            ``no code`` (the folder has no code files) or ``failed`` (the first build failed).
        nodes, edges, communities, files: the loaded graph's size (0 when none is loaded).
        built_at: when graph.json was written (epoch seconds; None when there is none).
        last_rebuild_seconds: how long the latest rebuild took.
        last_error: the end of graphify's output when the latest rebuild failed.
        loaded: this process has the graph in memory (``cortana doctor`` does not load it: no size then).
        building_elsewhere_since: when another process (a session) started the build under way now.
    """

    state: str
    nodes: int = 0
    edges: int = 0
    communities: int = 0
    files: int = 0
    built_at: float | None = None
    last_rebuild_seconds: float | None = None
    last_error: str | None = None
    loaded: bool = True
    building_elsewhere_since: float | None = None
    skipped: tuple[str, ...] = ()
    """What the build leaves out and by which rule (``installed packages: node_modules/``,
    ``over 256 KiB: gen/big.py``)."""

    def summary(self) -> str:
        """One line for people: state, size, age."""
        if self.building_elsewhere_since is not None:
            took = _age(time.time() - self.building_elsewhere_since)
            what = "rebuilding it" if self.built_at is not None else "building it for the first time"
            return f"building: another Cortana process is {what} (started {took} ago)"
        if not self.loaded and self.built_at is not None:
            return f"{self.state}: graph.json built {_age(time.time() - self.built_at)} ago (not loaded yet)"
        if not self.nodes and self.built_at is None:
            return self.state
        age = f", built {_age(time.time() - self.built_at)} ago" if self.built_at else ""
        took = f", last rebuild {self.last_rebuild_seconds:.1f}s" if self.last_rebuild_seconds is not None else ""
        return (
            f"{self.state}: {self.nodes:,} nodes, {self.edges:,} edges, {self.communities:,} communities, "
            f"{self.files:,} files{age}{took}"
        )


class KnowledgeGraph(TurnExtension):
    """A graphify graph of a folder's code, joined to every turn of the agents it is given to.

    Args:
        path: the folder whose code the graph covers (its ``graphify-out/`` holds the graph).
        exclude: gitignore-style patterns graphify skips; written to a managed block of
            ``.graphifyignore`` (the file's other lines are left alone).
        context: what joins each turn: ``lookup`` (the names the prompt mentions, the default),
            ``report`` (the graph's summary, once per thread and graph), ``both``, or ``off``.
        eager_tools: offer the graph tools from the start of every run; by default they are a
            group (``code_graph``) the model loads when it needs them, keeping small prompts small.
        command: the graphify executable (default: the one beside this Python, else on PATH).
        auto_rebuild: rebuild after a turn that ran a tool that is not read-only.
        build_timeout: the most seconds one ``graphify update`` may run.
        sandbox: how graphify is confined (default: by the kernel where it can, writing only its output folder;
            a :class:`~cortana.sandbox.Sandbox` with ``enabled=False`` for none).
    """

    name = "knowledge_graph"
    looks_up_workspace = True  # its lookup is left out of a turn the tool judge finds no tool for

    def __init__(
        self,
        path: str | Path = ".",
        exclude: Sequence[str] = (),
        *,
        context: ContextMode = "lookup",
        eager_tools: bool = False,
        command: str | None = None,
        auto_rebuild: bool = True,
        build_timeout: float = 600.0,
        sandbox: Sandbox | None = None,
    ) -> None:
        if context not in CONTEXT_MODES:
            raise UserError(f"KnowledgeGraph context must be one of {', '.join(CONTEXT_MODES)}; got {context!r}.")
        if not 0 < build_timeout < float("inf"):
            raise UserError(f"KnowledgeGraph build_timeout must be a positive number of seconds, got {build_timeout}.")
        self.root = Path(path).expanduser().resolve()
        if not self.root.is_dir():
            raise UserError(f"KnowledgeGraph needs a folder; {self.root} is not one.")
        self.sandbox = sandbox if sandbox is not None else Sandbox(self.root)
        self.exclude = check_patterns(exclude)
        self.context_mode: ContextMode = context
        self.eager_tools = eager_tools
        self.auto_rebuild = auto_rebuild
        self.build_timeout = build_timeout
        self.cli_runs = 0
        """How many times graphify has been run (tests and ``/graph`` read it)."""
        self._command = command
        self._executable: str | None = None
        self._looked_for_cli = False
        self._index: GraphIndex | None = None
        self._loaded_stamp: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._first: asyncio.Task[GraphIndex | None] | None = None
        self._skipped: tuple[str, ...] = ()
        self._again = False
        self._changed = False
        self._refreshed = False
        self._last: UpdateOutcome | None = None
        self._reported: dict[str, int] = {}
        self._tools: list[Tool] | None = None
        self._records = BuildRecords(self.root)
        self._foreign = False
        """graph.json is there but Cortana did not build it (or it changed since): it is rebuilt, not read."""

    # -- what is there -------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """Whether the graphify CLI is installed (looked for once; a warning says how to install it)."""
        if not self._looked_for_cli:
            self._looked_for_cli = True
            self._executable = find_graphify(self._command)
            if self._executable is None:
                log.warning(
                    "graphify is not installed, so the agent runs without the code graph of %s. Install it: %s",
                    printable(str(self.root)),  # a folder's name may hold anything a terminal would act on
                    INSTALL_HINT,
                )
        return self._executable is not None

    @property
    def graph_file(self) -> Path:
        """The graph.json this graph reads."""
        return graph_json(self.root)

    @property
    def index(self) -> GraphIndex | None:
        """The loaded graph, or None before the first load."""
        return self._index

    @property
    def rebuilding(self) -> bool:
        """Whether ``graphify update`` is running for this graph now."""
        return self._running() is not None

    def status(self) -> GraphStatus:
        """Where the graph stands: its state, size and age."""
        if not self.available:
            return GraphStatus("unavailable")
        try:
            built_at: float | None = self.graph_file.stat().st_mtime
        except OSError:
            built_at = None
        stats = self._index.stats() if self._index is not None else {}
        elsewhere = None if self.rebuilding else self._records.building_since()
        if self.rebuilding or elsewhere is not None:
            state = "building"
        elif self._index is None and self._foreign:
            state = "not built"
        elif self._index is None and built_at is None:
            if self._last is None or self._last.ok:
                state = "not built"
            else:
                state = "no code" if self._last.no_code else "failed"
        elif self._changed or (self._last is not None and not self._last.ok):
            state = "stale"
        else:
            state = "ready"
        return GraphStatus(
            state,
            built_at=built_at,
            last_rebuild_seconds=self._last.seconds if self._last else None,
            last_error=None if self._last is None or self._last.ok or self._last.no_code else self._last.output,
            loaded=self._index is not None,
            building_elsewhere_since=elsewhere,
            skipped=self._skipped,
            **stats,
        )

    # -- loading and rebuilding ----------------------------------------------------------------

    async def ensure(self) -> GraphIndex | None:
        """The graph, loading graph.json if needed (and building it first when there is none).

        A graph loaded from an earlier session is refreshed once, in the background, since the
        files may have changed since. None without the CLI or when the build failed.
        """
        if not self.available:
            return None
        await self._load_if_newer()
        running = self._running()
        if self._index is None and running is None and self._last is not None and not self._last.ok:
            return None  # no code, or a failed build: not retried every turn, only after a change or rebuild()
        if self._index is None:
            await (asyncio.shield(running) if running is not None else self.rebuild())
        elif not self._refreshed:
            self.request_rebuild()
        return self._index

    async def ready_within(self, seconds: float) -> GraphIndex | None:
        """The graph if it is ready within ``seconds``; else None, while it goes on loading or building behind.

        A first build of a big folder takes minutes (graphify's cost grows about as the square of a
        file's size): a turn waits this long at most and goes on without the graph, and a later turn
        finds it ready.
        """
        if self._index is not None:
            return self._index
        task = self._first
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = self._first = asyncio.get_running_loop().create_task(self.ensure(), name="knowledge_graph.ensure")
            task.add_done_callback(_quiet)
        try:
            return await asyncio.wait_for(asyncio.shield(task), seconds)
        except TimeoutError:
            log.info("the code graph of %s is still being built; the turn goes on without it", self.root)
            return None

    def start(self) -> None:
        """Begin loading (or building) the graph in the background; for an app that starts up."""
        if self.available and self._running() is None:
            self._task = asyncio.get_running_loop().create_task(self._ensure_quietly(), name="knowledge_graph.start")

    async def rebuild(self, *, force: bool = False) -> GraphStatus:
        """Run ``graphify update`` now (or join the one running, and run once more after it); then the status.

        Args:
            force: let the graph shrink even when graphify suspects lost nodes (``--force``).
        """
        task = self.request_rebuild(force=force)
        if task is not None:
            await asyncio.shield(task)
        return self.status()

    def request_rebuild(self, *, force: bool = False) -> asyncio.Task[None] | None:
        """Start a rebuild in the background (or queue one after the running one); the task, or None without the CLI."""
        if not self.available:
            return None
        self._refreshed = True
        running = self._running()
        if running is not None:
            self._again = True
            return running
        self._task = asyncio.get_running_loop().create_task(self._rebuild_loop(force), name="knowledge_graph.rebuild")
        return self._task

    async def wait_idle(self) -> None:
        """Wait until no rebuild is running."""
        while (task := self._running()) is not None:
            await asyncio.shield(task)

    async def aclose(self, *, timeout: float = 30.0) -> None:
        """Let a running rebuild finish (stopped after ``timeout`` seconds; graphify writes atomically)."""
        task = self._running()
        if task is None:
            return
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), timeout)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _running(self) -> asyncio.Task[None] | None:
        task = self._task
        if task is None or task.done():
            return None
        try:
            same_loop = task.get_loop() is asyncio.get_running_loop()
        except RuntimeError:
            same_loop = False
        return task if same_loop else None

    async def _ensure_quietly(self) -> None:
        try:
            await self._load_if_newer()  # an earlier session's graph serves lookups while it is refreshed
            self._refreshed = True
            await self._rebuild_loop(force=False)
        except Exception:
            log.exception("the code graph of %s could not be built", self.root)

    async def _rebuild_loop(self, force: bool) -> None:
        assert self._executable is not None
        while True:
            self._again = False
            await asyncio.to_thread(self._write_excludes)
            self.cli_runs += 1
            await asyncio.to_thread(self._records.mark_building)
            try:
                outcome = await run_update(
                    self.root, self._executable, timeout=self.build_timeout, force=force, sandbox=self.sandbox
                )
            finally:
                await asyncio.to_thread(self._records.clear_building)
            self._last = outcome
            if outcome.ok or outcome.no_code:
                self._changed = False
                if outcome.ok:
                    report = self.graph_file.parent / REPORT_FILE
                    await asyncio.to_thread(self._records.remember, {"graph": self.graph_file, "report": report})
                await self._load_if_newer()
                log.info("code graph of %s rebuilt in %.1fs", self.root, outcome.seconds)
            else:
                log.warning("graphify update failed in %s: %s", self.root, outcome.output[-500:])
            if not self._again:
                return

    def _write_excludes(self) -> None:
        rules = skip_rules(self.root)
        self._skipped = tuple(f"{rule}: {pattern}" for rule, pattern in rules)
        self._write_block([*self.exclude, *(pattern for _, pattern in rules)])
        out = self.graph_file.parent
        ours = [IGNORE_FILE, *([f"{out.name}/"] if out.parent == self.root else [])]
        try:  # the graph and its ignore file are Cortana's, not the user's change: out of git status
            exclude_from_git(self.root, ours)
        except OSError as exc:
            log.warning("could not add the code graph's files to %s/.git/info/exclude: %s", self.root, exc)

    def _write_block(self, patterns: list[str]) -> None:
        try:
            write_ignore_block(self.root, patterns)
        except (OSError, UserError) as exc:
            log.warning("could not write the exclude block of %s/.graphifyignore: %s", self.root, exc)

    async def _load_if_newer(self) -> None:
        try:
            stat = self.graph_file.lstat()  # a link (out of the workspace, say) is not graphify's: never followed
        except OSError:
            return
        if not S_ISREG(stat.st_mode):
            if not self._foreign:
                log.warning("%s is not a regular file: it is rebuilt before it is read", self.graph_file)
            self._foreign = True
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._loaded_stamp and self._index is not None:
            return
        if not await asyncio.to_thread(self._records.built, "graph", self.graph_file):
            if not self._foreign:
                log.warning(
                    "%s was not built by Cortana here (or it changed since): it is rebuilt before it is read",
                    self.graph_file,
                )
            self._foreign = True
            return
        self._foreign = False
        try:
            index = await asyncio.to_thread(GraphIndex.load, self.graph_file)
        except UserError as exc:
            log.warning("%s", exc)
            return
        self._index, self._loaded_stamp = index, stamp

    # -- the turn ------------------------------------------------------------------------------

    async def context(self, thread: ThreadRef, prompt: str) -> str | None:
        """The lookup of the names ``prompt`` mentions (and the report, by ``context``); None for a plain prompt."""
        mode = self.context_mode
        if mode == "off":
            return None
        names = names_in(prompt) if mode != "report" else Names()
        wants_report = mode in ("report", "both")
        if not wants_report and not names.strong and (not names.weak or self._index is None):
            return None  # nothing to look up, or only weak words and no graph in memory: no work at all
        if not self.available:
            return None
        graph = self._index or await self.ready_within(TURN_WAIT_S)
        if graph is None:
            return None  # still building (the turn goes on; /graph says so), or no graph to have
        blocks = [self._report_for(thread)] if wants_report else []
        blocks.append(lookup_block(graph, names))
        return "\n\n".join(block for block in blocks if block) or None

    def lookup(self, prompt: str) -> str | None:
        """The per-turn block for ``prompt`` from the graph already in memory (no load, no process)."""
        if self._index is None:
            return None
        names = names_in(prompt)
        return lookup_block(self._index, names) if names else None

    def tools(self, thread: ThreadRef) -> Sequence[Tool | ToolGroup]:
        """The graph tools: a group loaded on demand (or eager); none without the CLI."""
        if not self.available:
            return ()
        if self._tools is None:
            self._tools = graph_tools(self)
        description = (
            "The code graph of this project: who calls a function, what breaks if something changes, "
            "the shortest link between two names, the most connected code."  # no folder name: the tools' text is
            # the same in every folder, so a new folder's first prompt shares all of it with a saved prompt cache
        )
        return [ToolGroup(TOOL_GROUP, description, list(self._tools), eager=self.eager_tools)]

    async def after_turn(self, result: RunResult) -> None:
        """Rebuild when the turn ran a tool that may have changed files (in the background of the reply)."""
        if not (self.auto_rebuild and result.changed_by and self.available):
            return
        self._changed = True
        await self.rebuild()

    def _report_for(self, thread: ThreadRef) -> str | None:
        """The graph's report summary, once per thread for each graph (it would repeat every turn otherwise)."""
        stamp = self._loaded_stamp[0] if self._loaded_stamp else 0
        if self._reported.get(thread.thread_id) == stamp:
            return None
        path = self.graph_file.parent / REPORT_FILE
        report = read_report(path) if self._records.built("report", path) else None
        if report:
            self._reported[thread.thread_id] = stamp
        return report


def lookup_block(graph: GraphIndex, names: Names) -> str | None:
    """The per-turn context for ``names``: each one found described with file:line sources; None if none is found."""
    described: list[str] = []
    seen: set[int] = set()
    candidates = [(name, Resolution(tuple(graph.find(name)))) for name in names.strong]  # no closest: not for context
    candidates += [(word, Resolution(tuple(graph.exact_class(word)))) for word in names.weak]
    for name, resolution in candidates:
        if not resolution.nodes or all(node.index in seen for node in resolution.nodes):
            continue
        seen.update(node.index for node in resolution.nodes)
        described.append(describe_resolution(name, resolution, graph=graph))
        if len(described) >= MAX_LOOKUPS:
            break
    if not described:
        return None
    return "Where the names in this message are defined and used (from graphify):\n" + "\n".join(described)


def read_report(path: Path) -> str | None:
    """The summary, hubs and god-node sections of graphify's GRAPH_REPORT.md, bounded; None without one."""
    try:
        text = read_regular_file(path, 1 << 20).decode("utf-8", "replace")
    except (OSError, UserError):
        return None
    keep: list[str] = []
    keeping = False
    for line in text.splitlines():
        if line.startswith("## "):
            keeping = line[3:].strip().split(" ")[0] in ("Summary", "Community", "God")
        if keeping and line.strip():
            keep.append(line)
    body = printable("\n".join(keep))
    if not body:
        return None
    if len(body) > MAX_REPORT_CHARS:
        body = body[: MAX_REPORT_CHARS - 1] + "…"
    return "Code graph report (graphify):\n" + body


def graph_tools(graph: KnowledgeGraph) -> list[Tool]:
    """The six graph tools over ``graph``; the first five only read."""

    async def loaded() -> GraphIndex:
        index = graph.index or await graph.ready_within(TOOL_WAIT_S)
        if index is None:
            status = graph.status()
            if status.state == "building":
                raise ToolError(
                    "The code graph is still being built (the first build of a big folder takes minutes); "
                    "use grep_files and read_file for now, and ask for the graph again later."
                )
            detail = f": {status.last_error[-300:]}" if status.last_error else ""
            raise ToolError(f"The code graph is not available ({status.state}{detail}).")
        return index

    def one(index: GraphIndex, name: str) -> Node:
        resolution = index.resolve(name)
        if len(resolution.nodes) != 1:
            raise ToolError(describe_resolution(name, resolution, graph=index, limit=2))
        return resolution.nodes[0]

    async def query_knowledge_graph(question: str, depth: int = 2) -> str:
        """Show the part of the code graph around the names a question mentions: nodes and edges with file:line.

        Args:
            question: a question naming code, e.g. "how does build_app use SkillRegistry?"
            depth: how many steps out from those names (1-3).
        """
        return describe_query(await loaded(), question, depth=max(1, min(depth, 3)))

    async def explain_graph_node(name: str) -> str:
        """Explain one class, function, method or file: where it is, what calls it, what it calls, who uses it.

        Args:
            name: e.g. "load_defaults", "SkillRegistry.lookup", "store.py" or "pkg/store.py::load_defaults".
        """
        index = await loaded()
        return describe_resolution(name, index.resolve(name), graph=index, limit=20)

    async def graph_path(source: str, target: str) -> str:
        """Find the shortest chain of calls, imports and containment linking two names in the code.

        Args:
            source: the name to start from.
            target: the name to reach.
        """
        index = await loaded()
        return describe_path(index, one(index, source), one(index, target))

    async def graph_affected(name: str, depth: int = 2) -> str:
        """List what may break if a class, function or file changes: everything that calls, imports or uses it.

        Args:
            name: the class, function or file that would change.
            depth: how many steps back to follow (1-4).
        """
        index = await loaded()
        return describe_affected(index, one(index, name), depth=max(1, min(depth, 4)))

    async def graph_god_nodes(top: int = 10) -> str:
        """List the most connected classes and functions: the code the rest of the project leans on.

        Args:
            top: how many to list (1-30).
        """
        return describe_god_nodes(await loaded(), max(1, min(top, 30)))

    async def update_knowledge_graph() -> str:
        """Rebuild the code graph now from the files as they are (it also rebuilds by itself after edits)."""
        before = graph.index.stats() if graph.index is not None else None
        status = await graph.rebuild()
        if status.last_error:
            raise ToolError(f"graphify update failed: {status.last_error[-800:]}")
        change = ""
        if before is not None:
            change = f" ({status.nodes - before['nodes']:+,} nodes, {status.edges - before['edges']:+,} edges)"
        return f"Code graph rebuilt{change}: {status.summary()}."

    read_only: list[Callable[..., Awaitable[str]]] = [
        query_knowledge_graph,
        explain_graph_node,
        graph_path,
        graph_affected,
        graph_god_nodes,
    ]
    return [Tool(function, read_only=True, timeout=60.0, kind="search") for function in read_only] + [
        Tool(update_knowledge_graph, timeout=graph.build_timeout + 30)
    ]


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 0):.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86_400:.0f}d"


def _quiet(task: asyncio.Task[GraphIndex | None]) -> None:
    """Collect a background load's outcome (a failed build is already logged and in the status)."""
    if not task.cancelled():
        task.exception()


def skip_rules(root: Path) -> list[tuple[str, str]]:
    """What graphify should leave out of ``root``, as (rule, gitignore pattern) pairs, in a stable order.

    Vendored and generated folders and files by name (:data:`SKIPPED_BY_NAME`), and each code file
    over :data:`MAX_SOURCE_BYTES` by path: graphify's time grows about as the square of a file's size
    (0.2 MiB 8.8 s, 0.7 MiB 127 s), and such files are generated or bundled, not written by hand.
    """
    from cortana.tools.builtin.workspace import Workspace  # the built-in tools load after the prompt: on use

    rules = [(rule, pattern) for rule, patterns in SKIPPED_BY_NAME.items() for pattern in patterns]
    space = Workspace(root)
    big: list[str] = []
    for count, path in enumerate(space.files(root)):
        if count >= MAX_FILES_LOOKED_AT:
            break
        if path.suffix.lower() not in CODE_SUFFIXES:
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_size > MAX_SOURCE_BYTES:
                big.append("/" + space.relative(path))
    rules += [(f"over {MAX_SOURCE_BYTES >> 10} KiB", pattern) for pattern in sorted(big)[:MAX_BIG_FILES]]
    return rules

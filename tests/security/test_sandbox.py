"""The kernel's sandbox, tested against the real kernel: what a confined command can and cannot do.

Each reproduction of the report that prompted it (an "always" widened by an option, ``--yes`` reaching
``.git/`` through a program's own writes) runs here as the model would run it: through ``run_command``
and the workspace gate. The markers a hostile command tries to leave are outside the workspace (which a
confined command may write): on main each of these was created.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortana import Agent, PermissionDecision, ToolCall
from cortana.sandbox import KernelSupport, Sandbox, kernel_support
from cortana.testing import ScriptedModel, tool_call, tool_call_response
from cortana.tools import Tool
from cortana.tools.builtin import Workspace, builtin_tools, workspace_gate
from cortana.tools.builtin.commands import run_shell
from cortana.tools.permissions import Scope

SUPPORT = kernel_support()
pytestmark = pytest.mark.skipif(
    not SUPPORT.confines and os.environ.get("CORTANA_TESTS_WITHOUT_SANDBOX") == "1",
    reason=f"the kernel cannot confine here: {SUPPORT.summary()}",
)
MODES = ["namespaces", "landlock"]
TINY = Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny.py"


def test_this_kernel_confines() -> None:
    """These machines have Landlock and user namespaces; a CI machine without them must say so, not skip."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the sandbox is Linux's")
    assert SUPPORT.abi >= 3 and SUPPORT.namespaces is None and SUPPORT.landlock is None, SUPPORT
    assert SUPPORT.confines and "Landlock ABI" in SUPPORT.summary()


class Asker:
    """Answers from a list, recording every call it was asked about with the reason and scope offered."""

    def __init__(self, *answers: PermissionDecision) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str | None, str | None]] = []
        self.tools: list[str] = []

    def __call__(self, call: ToolCall, tool: Tool, reason: str | None, scope: Scope | None) -> PermissionDecision:
        self.asked.append((str(call.arguments.get("command")), reason, scope and scope.label))
        self.tools.append(call.name)
        return self.answers.pop(0) if self.answers else PermissionDecision.deny("no more answers")


async def run_commands(
    root: Path, *commands: str | dict[str, object], asker: Asker | None = None, sandbox: Sandbox | bool = True,
    allow: tuple[str, ...] = (),
) -> list[str]:  # fmt: skip
    """Each command through run_command and the workspace gate, as a model would call them; the tool results."""
    space = Workspace(root, sandbox=sandbox)
    script = [
        tool_call_response(tool_call("run_command", **(c if isinstance(c, dict) else {"command": c}))) for c in commands
    ]
    gate = workspace_gate(space, approve=asker, allow=allow)
    result = await Agent(ScriptedModel([*script, "done"]), tools=builtin_tools(space), permissions=gate).run("go")
    return [m.content for m in result.new_messages if m.role == "tool"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def empty(folder: Path) -> bool:
    return not any(folder.iterdir())


def confined_sandbox(root: Path, mode: str) -> Sandbox:
    return Sandbox(root, mode=mode)  # type: ignore[arg-type]


# -- writes -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_confined_command_writes_the_workspace_and_nothing_outside_it(
    project: Path, outside: Path, mode: str
) -> None:
    home_marker = Path.home() / f".cortana-sandbox-test-{os.getpid()}"
    results = await run_commands(
        project,
        "echo new > src/new.txt && cat src/new.txt",
        f"touch {outside}/pwned",
        f"echo x > {home_marker}",
        f"ln -s {outside} src/link && touch src/link/through-a-symlink",
        f"mv src/app.py {outside}/stolen.py",
        sandbox=confined_sandbox(project, mode),
    )
    assert results[0] == "exit code 0\nnew\n"
    assert all("Permission denied" in text for text in results[1:]), results
    assert empty(outside) and not home_marker.exists()
    assert (project / "src" / "app.py").exists()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "command",
    [
        "echo x > .git/hooks/pre-commit",
        "cd .git/hooks && echo x > post-checkout",
        "git config core.hooksPath hooks2",
        "mv .git .git-old && mkdir -p .git/hooks && echo x > .git/hooks/pre-commit",
        "rm -rf .git",
        "ln .git/config config-link && echo '[core] fsmonitor = touch PWNED' >> config-link",
        "ln -s .git g && echo x > g/hooks/pre-commit",
        "echo x > /proc/$PPID/root$(pwd)/.git/hooks/pre-commit",
        "echo x > /proc/self/cwd/.git/hooks/pre-commit",
        "python3 -c \"import os; os.open('.git/hooks/pre-commit', os.O_CREAT|os.O_WRONLY)\"",
        "truncate -s 0 .git/config",
        "echo 'engine: openai' >> cortana.yml",
        "echo x > docs/hooks/pre-commit",  # docs: a symbolic link to .git, there before the command
        "echo x > outside-link/pwned",  # a symbolic link out of the workspace, there before the command
    ],
)
async def test_a_confined_command_cannot_change_a_protected_path_by_any_spelling(
    project: Path, command: str, mode: str
) -> None:
    (project / "cortana.yml").write_text("memory:\n  recall: false\n")
    (project / "docs").symlink_to(project / ".git")
    (project / "outside-link").symlink_to(project.parent)
    hooks = sorted(p.name for p in (project / ".git" / "hooks").iterdir())
    config = (project / ".git" / "config").read_text()
    results = await run_commands(project, command, sandbox=confined_sandbox(project, mode))
    assert not results[0].startswith("exit code 0"), results[0]
    assert sorted(p.name for p in (project / ".git" / "hooks").iterdir()) == hooks
    assert (project / ".git" / "config").read_text() == config
    assert (project / "cortana.yml").read_text() == "memory:\n  recall: false\n"
    assert not (project.parent / "pwned").exists()


async def test_a_protected_path_a_confined_command_creates_is_moved_out(project: Path) -> None:
    results = await run_commands(
        project, "mkdir -p personality skills/evil && echo 'obey' > personality/assistant.md && touch ok.txt"
    )
    assert results[0].startswith("exit code 0") and "moved to" in results[0], results[0]
    assert "personality" in results[0] and "skills" in results[0]
    assert not (project / "personality").exists() and not (project / "skills").exists()
    assert (project / "ok.txt").exists(), "the rest of what it did stays"


async def test_a_confined_command_can_run_the_projects_tests(project: Path, outside: Path) -> None:
    (project / "tests").mkdir()
    (project / "tests" / "test_app.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom app import add\n\n"
        "def test_add(tmp_path):\n    (tmp_path / 'x').write_text('scratch')\n    assert add(2, 3) == 5\n"
    )
    results = await run_commands(project, f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    assert results[0].startswith("exit code 0") and "1 passed" in results[0], results[0]


# -- the network --------------------------------------------------------------------------------------------------


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on the host's loopback, outside any sandbox; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connection.sendall(b"secret from the host\n")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


CONNECT = "python3 -c \"import socket; print(socket.create_connection(('127.0.0.1', {port}), timeout=3).recv(99))\""


@pytest.mark.parametrize("mode", MODES)
async def test_a_confined_command_cannot_reach_a_server_outside_its_sandbox(
    project: Path, host_server: int, mode: str
) -> None:
    unconfined = await asyncio.to_thread(
        subprocess.run, CONNECT.format(port=host_server), shell=True, capture_output=True, text=True
    )
    assert "secret from the host" in unconfined.stdout, "the server answers from outside the sandbox"
    results = await run_commands(project, CONNECT.format(port=host_server), sandbox=confined_sandbox(project, mode))
    assert "secret from the host" not in results[0]
    assert "Connection refused" in results[0] or "Permission denied" in results[0], results[0]


async def test_a_test_suite_may_serve_on_its_own_loopback(project: Path) -> None:
    script = (
        "import socket, threading\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n"
        "threading.Thread(target=lambda: server.accept()[0].sendall(b'pong'), daemon=True).start()\n"
        "print(socket.create_connection(server.getsockname()).recv(9).decode())\n"
    )
    (project / "serve.py").write_text(script)
    results = await run_commands(project, "python3 serve.py")
    assert results[0] == "exit code 0\npong\n", results[0]


async def test_a_confined_command_cannot_reach_the_machines_unix_sockets(project: Path, outside: Path) -> None:
    """A daemon listening by path (the Docker daemon, a tmux server, an SSH agent) would run anything it is asked."""
    path = outside / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        command = f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('in')\""
        results = await run_commands(project, command)
    finally:
        server.close()
    assert "\nin\n" not in results[0] and "Connection refused" in results[0], results[0]


# -- other processes ----------------------------------------------------------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the same user, outside any sandbox."""
    process = subprocess.Popen(["sleep", "30"])
    yield process
    process.kill()
    process.wait()


async def test_a_confined_command_cannot_signal_processes_outside_it(
    project: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    if SUPPORT.abi < 6:
        pytest.skip("signals are scoped from Landlock ABI 6")
    results = await run_commands(project, f"kill -9 {sleeper.pid}; kill -9 $PPID")
    await asyncio.sleep(0.2)
    assert sleeper.poll() is None, "the process outside the sandbox lives"
    assert "Operation not permitted" in results[0], results[0]


async def test_a_step_that_fails_stops_the_command_before_it_runs(project: Path, outside: Path) -> None:
    marker = outside / "ran"
    space = Sandbox(project)
    with space.confined(project / "missing-folder") as confined:  # a writable path that is not there
        finished = await run_shell(f"touch {marker}", project, confined.environment(os.environ), 10, confined=confined)
    assert finished.refused is not None and "missing-folder" in finished.refused
    assert not marker.exists()


# -- the bypasses of the report, with the sandbox: they run, confined --------------------------------------------


@pytest.fixture
def bypass_project(project: Path, outside: Path) -> Path:
    (project / "Makefile").write_text("test:\n\t@echo tests ran\n")
    origin = outside.parent / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "commit", "-qm", "two", "--allow-empty"], check=True)
    subprocess.run([*git, "remote", "add", "origin", str(origin)], check=True)
    subprocess.run([*git, "push", "-q", "origin", "HEAD:main"], check=True)
    with tarfile.open(project / "a.tar", "w") as archive:
        archive.add(project / "Makefile", arcname="Makefile")
    return project


def bypasses(outside: Path) -> list[str]:
    marker = outside / "PWNED"
    return [
        f"make test --eval='$(shell touch {marker})'",
        f"git -c user.name=t -c user.email=t@t rebase --exe='touch {marker}' HEAD~1",
        f"git fetch --upload-pac='touch {marker}; git-upload-pack' origin",
        f"tar -xf a.tar --to-comm='touch {marker}'",
        f"tar -xf a.tar --checkpoint=1 --checkpoint-act=exec='touch {marker}'",
    ]


def test_each_bypass_runs_its_code_outside_any_sandbox(bypass_project: Path, outside: Path) -> None:
    """The reproductions are real: run as they are, each leaves the marker (what an "always" let happen)."""
    for command in bypasses(outside):
        subprocess.run(command, shell=True, cwd=bypass_project, capture_output=True, check=False)
        assert (outside / "PWNED").exists(), command
        (outside / "PWNED").unlink()
        subprocess.run(["git", "-C", str(bypass_project), "rebase", "--abort"], capture_output=True, check=False)


async def test_in_the_sandbox_a_bypass_runs_confined_and_leaves_nothing_outside(
    bypass_project: Path, outside: Path
) -> None:
    asker = Asker()
    results = await run_commands(bypass_project, *bypasses(outside), asker=asker)
    assert asker.asked == [], "confined commands are not asked"
    assert not (outside / "PWNED").exists(), results


async def test_outside_the_sandbox_every_call_is_asked_with_the_reason(project: Path, outside: Path) -> None:
    asker = Asker(PermissionDecision.allow(remember=True), PermissionDecision.allow())
    command = f"touch {outside}/approved"
    results = await run_commands(
        project,
        {"command": command, "sandbox": False},
        {"command": command, "sandbox": "no"},  # whatever validation makes of it, the gate asks
        asker=asker,
        allow=("*",),  # --yes does not cover it either
    )
    assert [asked for asked, _, _ in asker.asked] == [command, command]
    assert all(scope is None for _, _, scope in asker.asked), "no 'always' outside the sandbox"
    assert "outside the sandbox" in str(asker.asked[0][1])
    assert results[0].startswith("exit code 0") and (outside / "approved").exists()


# -- without confinement: asked every time, and 'always' is the exact command ----------------------------------


UNAVAILABLE = KernelSupport.unavailable("this kernel has no Landlock")


async def test_without_confinement_an_always_covers_the_exact_command_only(bypass_project: Path, outside: Path) -> None:
    """Reproduces the report: "always" for `make test` covered `make test --eval=...`, `git rebase main` covered
    `git rebase --exe=...`, `tar -tf` covered `tar -xf --to-comm=...`. Without a sandbox each is asked."""
    first = ["make test", "git rebase main", "git fetch origin", "tar -tf a.tar", "tar -tf a.tar"]
    asker = Asker(*[PermissionDecision.allow(remember=True)] * 4, *[PermissionDecision.deny("no")] * 5)
    sandbox = Sandbox(bypass_project, support=UNAVAILABLE)
    results = await run_commands(bypass_project, *first[:4], *bypasses(outside), asker=asker, sandbox=sandbox)
    asked = [command for command, _, _ in asker.asked]
    assert asked == [*first[:4], *bypasses(outside)], "each widened command is asked again"
    assert [label for _, _, label in asker.asked[:4]] == first[:4], "'always' offered for the exact command"
    assert not (outside / "PWNED").exists() and all("Permission denied" in text for text in results[4:])


async def test_without_confinement_read_only_programs_are_remembered_with_any_arguments(project: Path) -> None:
    asker = Asker(PermissionDecision.allow(remember=True), PermissionDecision.deny("no"))
    sandbox = Sandbox(project, support=UNAVAILABLE)
    results = await run_commands(project, "ls src", "ls -la .", "sort -o /tmp/x src/app.py", asker=asker,
                                 sandbox=sandbox)  # fmt: skip
    assert [command for command, _, _ in asker.asked] == ["ls src", "sort -o /tmp/x src/app.py"]
    assert asker.asked[0][2] == "ls …" and results[1].startswith("exit code 0")


async def test_without_confinement_every_command_is_asked_and_the_tool_has_no_sandbox_argument(
    project: Path,
) -> None:
    space = Workspace(project, sandbox=Sandbox(project, support=UNAVAILABLE))
    tool = next(t for t in builtin_tools(space) if t.name == "run_command")
    assert "sandbox" not in tool.parameters["properties"]
    asker = Asker()
    results = await run_commands(project, "echo hi", "echo ho", asker=asker, sandbox=space.sandbox, allow=())
    assert len(asker.asked) == 2 and all("Permission denied" in text for text in results)


def test_the_sandbox_says_why_it_cannot_confine() -> None:
    assert UNAVAILABLE.mode is None and not UNAVAILABLE.confines
    assert "not available: this kernel has no Landlock" in UNAVAILABLE.summary()
    old = KernelSupport(abi=5, namespaces="unshare (user namespaces): Operation not permitted", landlock=None)
    assert old.mode == "landlock" and not old.confines
    assert "partial" in old.summary() and "UNIX sockets" in old.summary()


# -- the other processes Cortana starts ---------------------------------------------------------------------------


async def test_the_fix_workflows_test_runs_write_only_their_scratch_copy(project: Path, outside: Path) -> None:
    from cortana.repair.testrun import TestCommand, run_tests

    (project / "tests").mkdir()
    (project / "tests" / "test_escape.py").write_text(
        f"def test_escape():\n    open('{outside}/from-a-test', 'w').write('x')\n"
    )
    command = TestCommand(f"{sys.executable} -m pytest", "pytest", "test")
    report = await run_tests(command, project, dict(os.environ), sandbox=Sandbox(project))
    assert not report.ok and report.failures and "Permission denied" in report.failures[0].message
    assert not (outside / "from-a-test").exists()


async def test_a_workspace_mcp_server_runs_confined(project: Path, outside: Path) -> None:
    from cortana.config import MCPServerConfig
    from cortana.mcp import MCPServers

    server = project / "server.py"
    server.write_text(
        f"import runpy\ntry:\n    open('{outside}/from-a-server', 'w')\nexcept OSError:\n    open('denied', 'w')\n"
        f"runpy.run_path({str(TINY)!r}, run_name='__main__')\n"
    )
    config = MCPServerConfig(name="tiny", command=sys.executable, args=[str(server)], cwd=str(project))
    async with MCPServers([config], sandbox=Sandbox(project)) as servers:
        tools = await servers.groups()[0].ensure_loaded()
        assert tools
    assert not (outside / "from-a-server").exists() and (project / "denied").exists()


def test_git_that_cortana_starts_runs_confined_and_reads_only(
    project: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``git`` first on PATH that tries to write before running the real one: the snapshot's git still lists
    the files, and neither write lands (the workspace is read-only to it too)."""
    from cortana.learning.snapshot import WorkspaceSnapshot

    real = shutil.which("git")
    bin_folder = outside.parent / "bin"
    bin_folder.mkdir()
    (bin_folder / "git").write_text(
        f'#!/bin/sh\ntouch "{outside}/from-git" 2>/dev/null\ntouch "{project}/from-git" 2>/dev/null\n'
        f'exec "{real}" "$@"\n'
    )
    (bin_folder / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_folder}{os.pathsep}{os.environ['PATH']}")
    snapshot = WorkspaceSnapshot(project, sandbox=Sandbox(project))
    (project / "notes.txt").write_text("x\n")
    assert [change.path for change in snapshot.changes()] == ["notes.txt"], "git listed the files"
    assert not (outside / "from-git").exists() and not (project / "from-git").exists()


async def test_a_newcomers_session_asks_only_for_the_edit(project: Path) -> None:
    """The session bench/approvals.py counts (on main: 9 questions answering "yes", 7 answering "always"): with
    the sandbox, the commands inside the workspace run confined and only the edit, which the user reviews, asks."""
    (project / "tests").mkdir()
    (project / "src" / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (project / "tests" / "test_app.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom app import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    pytest_command = f"{sys.executable} -m pytest -q -p no:cacheprovider"
    calls = [
        {"command": "git status --short"},
        {"command": "ls -la tests"},
        {"command": pytest_command},
        {"command": "git diff --stat"},
        {"command": "grep -rn add src"},
    ]
    asker = Asker(PermissionDecision.allow())
    space = Workspace(project)
    script = [tool_call_response(tool_call("run_command", **call)) for call in calls]
    script.insert(3, tool_call_response(tool_call("edit_file", path="src/app.py", old_text="a - b", new_text="a + b")))
    script.insert(4, tool_call_response(tool_call("run_command", command=f"{pytest_command} tests")))
    gate = workspace_gate(space, approve=asker)
    result = await Agent(ScriptedModel([*script, "Fixed."]), tools=builtin_tools(space), permissions=gate).run("fix")
    assert asker.tools == ["edit_file"], "one question: the edit"
    assert "1 passed" in [m.content for m in result.new_messages if m.role == "tool"][4]


def test_doctor_shows_the_sandbox_and_its_abi(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project = tmp_path / "project"
    project.mkdir()
    (project / "cortana.yml").write_text("memory:\n  recall: false\n")
    (tmp_path / "cached.py").write_text("x\n")
    os.link(tmp_path / "cached.py", project / "linked.py")

    def doctor(folder: Path) -> dict[str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "cortana.cli.main", "doctor", "--engine", "llamacpp", "--base-url",
             scripted_engine.url],
            cwd=folder, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1", "GITHUB_TOKEN": "ghp_x"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in done.stdout.splitlines() if line.strip()]
        return {words[0]: words[1] if len(words) > 1 else "" for words in rows}

    rows = doctor(project)
    assert f"Landlock ABI {SUPPORT.abi} with user, mount and network namespaces" in rows["sandbox"], rows
    assert "commands are confined to the workspace" in rows["sandbox"]
    assert rows["workspace"].startswith("confined commands may write")
    assert rows["hard links"].startswith("kept read-only for confined commands: 1 path whose files"), rows
    assert "GITHUB_TOKEN" in rows["environment"] and "ghp_x" not in rows["environment"]
    assert "no terminal" in rows["processes"]
    home = doctor(tmp_path)  # HOME itself
    assert "is your home folder" in home["workspace"] and "not confining" in home["sandbox"], home


async def test_where_the_kernel_cannot_confine_the_assistant_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortana import Assistant, Settings
    from cortana.cli.doctor import doctor_rows
    from cortana.sandbox import policy

    quiet = Settings(memory={"recall": False}, graphify={"enabled": False}, learning={"enabled": False})
    async with Assistant(tmp_path, quiet, client=ScriptedModel([]), heartbeat=False) as confined:
        assert confined.sandbox_warning() is None
    monkeypatch.setattr(policy, "_support", UNAVAILABLE)  # what the probe finds on a kernel without Landlock
    async with Assistant(tmp_path, quiet, client=ScriptedModel([]), heartbeat=False) as unconfined:
        warning = unconfined.sandbox_warning()
        rows = dict(await doctor_rows(unconfined))
    assert warning is not None and "not available: this kernel has no Landlock" in warning
    assert "each command is asked" in warning
    assert rows["sandbox"] == "not available: this kernel has no Landlock"
    off = quiet.model_copy(update={"sandbox": quiet.sandbox.model_copy(update={"enabled": False})})
    async with Assistant(tmp_path, off, client=ScriptedModel([]), heartbeat=False) as switched_off:
        assert switched_off.sandbox_warning() is None, "the user turned it off: no line"
        assert dict(await doctor_rows(switched_off))["sandbox"].startswith("off (sandbox.enabled: false)")


async def test_folders_the_user_adds_are_writable_and_gos_cache_is_private(project: Path, outside: Path) -> None:
    results = await run_commands(
        project,
        f"touch {outside}/cache-entry && echo $GOCACHE",
        sandbox=Sandbox(project, writable=[outside]),
    )
    assert results[0].startswith("exit code 0") and (outside / "cache-entry").exists(), results[0]
    assert "/cortana-tmp-" in results[0] and results[0].rstrip().endswith("go-build")


def test_a_folder_cannot_widen_its_own_sandbox_untrusted() -> None:
    from cortana.trust import sensitive_sections

    asked = sensitive_sections({"sandbox": {"enabled": False, "writable": ["~"], "ask": True}, "test": "make x"})
    assert asked == {"sandbox.enabled": False, "sandbox.writable": ["~"], "test": "make x"}
    assert sensitive_sections({"sandbox": {"ask": True, "shell_mode": True}}) == {}, "asking more needs no trust"


async def test_a_turn_nobody_watches_runs_no_command(project: Path) -> None:
    """A heartbeat's check-in speaks first; it does not act: a confined command is still refused there (unless the
    user's own permissions.allow or --yes says otherwise, as before)."""
    from cortana.messages import RunMetrics, ThreadRef
    from cortana.tools import RunContext

    space = Workspace(project)
    gate = workspace_gate(space)
    tool = next(t for t in builtin_tools(space) if t.name == "run_command")
    call = ToolCall(id="1", name="run_command", arguments={"command": "touch checked-in"})
    watched = RunContext(ThreadRef(resource_id="r", thread_id="t"), RunMetrics(), [])
    alone = RunContext(ThreadRef(resource_id="r", thread_id="t"), RunMetrics(), [], unattended=True)
    assert (await gate.decide(call, tool, watched)).action == "allow"
    refused = await gate.decide(call, tool, alone)
    assert refused.action == "deny" and "nobody is there" in str(refused.reason)


# -- hard links ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_hook_with_another_name_in_the_workspace_is_not_written_through_it(project: Path, mode: str) -> None:
    """An archive can hold a hard link: `notes.txt` and `.git/hooks/pre-commit` one file. A read-only mount of the
    hook does not cover its other name, so that name is kept read-only too (a submodule's config as well)."""
    hook = project / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\n")
    os.link(hook, project / "notes.txt")
    module = project / ".git" / "modules" / "lib"
    module.mkdir(parents=True)
    (module / "config").write_text("[core]\n")
    os.link(module / "config", project / "lib.cfg")
    results = await run_commands(
        project,
        "echo 'touch PWNED' >> notes.txt",
        "echo '[core] fsmonitor = touch PWNED' >> lib.cfg",
        "echo fine > src/other.txt && cat src/other.txt",
        sandbox=confined_sandbox(project, mode),
    )
    assert not results[0].startswith("exit code 0") and not results[1].startswith("exit code 0"), results
    assert hook.read_text() == "#!/bin/sh\n" and (module / "config").read_text() == "[core]\n"
    assert results[2] == "exit code 0\nfine\n", "the rest of the workspace stays writable"


@pytest.mark.parametrize("mode", MODES)
async def test_a_file_linked_from_a_cache_outside_cannot_be_changed_through_the_workspace(
    project: Path, outside: Path, mode: str
) -> None:
    """As uv (on Linux) and pnpm install packages: hard links to their shared cache, whose files other projects run
    unconfined. Reported: a confined command changed the cache's file through the workspace's name."""
    cache = outside / "cache" / "requests"
    cache.mkdir(parents=True)
    package = project / ".venv" / "lib" / "site-packages" / "requests"
    package.mkdir(parents=True)
    for name in ("__init__.py", "api.py"):
        (cache / name).write_text("def get(url): ...\n")
        os.link(cache / name, package / name)
    (package.parent / "_virtualenv.pth").write_text("import _virtualenv\n")  # written by the installer itself
    (project / "own.py").write_text("x = 1\n")
    os.link(project / "own.py", project / "own-too.py")  # two names, both in the workspace: stays writable
    results = await run_commands(
        project,
        "echo 'import os; os.system(\"touch /tmp/pwned\")' >> .venv/lib/site-packages/requests/api.py",
        "truncate -s 0 .venv/lib/site-packages/requests/__init__.py",
        "echo 'x = 2' > own-too.py && cat own.py",
        "echo 'import site' >> .venv/lib/site-packages/_virtualenv.pth && echo made",
        sandbox=confined_sandbox(project, mode),
    )
    assert not results[0].startswith("exit code 0") and not results[1].startswith("exit code 0"), results
    assert all((cache / name).read_text() == "def get(url): ...\n" for name in ("__init__.py", "api.py"))
    assert results[2] == "exit code 0\nx = 2\n", "a link inside the workspace is the workspace's own"
    assert results[3].startswith("exit code 0") and "made" in results[3], results[3]


def test_a_package_linked_whole_is_one_read_only_folder(project: Path, outside: Path) -> None:
    from cortana.sandbox import kernel

    cache = outside / "cache"
    package = project / ".venv" / "site-packages" / "rich"
    (cache / "sub").mkdir(parents=True)
    (package / "sub").mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # the venv's own files
    (package.parent / "_virtualenv.pth").write_text("import _virtualenv\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.pyc").write_bytes(b"\0")  # bytecode Python wrote: kept as it is
    for name in ("a.py", "sub/b.py"):
        (cache / name).write_text("x\n")
        os.link(cache / name, package / name)
    found = kernel.linked_out([str(project)], [str(project / ".git")])
    assert found == [str(package)], found
    (cache / "c.py").write_text("x\n")
    (package / "own.py").write_text("mine\n")  # a file of its own: the folder's files are bound one by one
    os.link(cache / "c.py", package / "c.py")
    expected = [str(package / "sub"), str(package / "a.py"), str(package / "c.py")]  # sub/ is still linked whole
    assert kernel.linked_out([str(project)], [str(project / ".git")]) == expected


async def test_too_many_linked_files_stop_confinement_with_the_reason(project: Path, outside: Path) -> None:
    from cortana.sandbox import kernel

    for number in range(kernel.MAX_LINKED_BINDS + 1):
        (outside / f"f{number}").write_text("")
        os.link(outside / f"f{number}", project / f"f{number}")
    space = Workspace(project, sandbox=confined_sandbox(project, "namespaces"))
    tool = next(t for t in builtin_tools(space) if t.name == "run_command")
    with pytest.raises(Exception, match="UV_LINK_MODE=copy") as refused:
        await tool.function(command="echo x > f1")
    assert "did not run" in str(refused.value)
    assert (outside / "f1").read_text() == ""

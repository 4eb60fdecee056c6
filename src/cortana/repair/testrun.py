"""The project's own tests as the checker: finding how they run, running them bounded, reading what failed.

:func:`find_test_command` looks for, in order: ``test:`` in cortana.yml; pytest
(a pytest configuration, a ``conftest.py``, or ``test_*.py`` files in
``tests/``, ``test/`` or the top folder); ``npm test`` (a ``package.json`` with
a real ``test`` script); ``go test ./...`` (``go.mod``); ``cargo test``
(``Cargo.toml``); ``make test`` (a ``Makefile`` with a ``test`` target). For
pytest the project's own ``.venv`` (or ``venv``) Python is used when there is
one.

:func:`run_tests` runs the command in a folder (a scratch copy, never the
user's files) within a time limit and an output limit, under the keeper, and
confined by the kernel when given a sandbox (it may write only the folder and
its report folder, and has no network). pytest reports through a JUnit XML file, read into
:class:`TestReport`: each test's id, and for each failure its message, the
frames of the traceback inside the folder (file, line, function) and the
assertion line. Other runners give their exit status and the end of their
output.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortana.repair.warm import WarmTests, python_of
from cortana.sandbox.policy import Sandbox
from cortana.sandbox.processes import keeper_argv, run_kept
from cortana.tools.builtin.commands import run_shell

__all__ = [
    "MAX_REPORT_BYTES",
    "CallValue",
    "Failure",
    "Frame",
    "TestCommand",
    "TestReport",
    "find_test_command",
    "is_test_file",
    "run_tests",
]

TEST_FOLDERS = ("tests", "test")
MAX_OUTPUT = 12_000
"""The most characters of a test run's output kept (its head and tail)."""
PRINTED_CHARS = 600
"""The most of a failing test's stderr kept (its end: where an error message is)."""
MAX_REPORT_BYTES = 32 * 1024 * 1024
"""The most of a report file a test run wrote (pytest's JUnit XML, the call trace) that is read back. A report
holds a line or two a test and, for a failure, its traceback and the end of its stderr: a suite of 10,000 tests
reports in a few MB. The file is the project's tests' to write, though, and read whole a 1 GiB one cost 2.1 GB
of memory: one past this bound is left unread, and the run counts by its exit status and output."""
_CAPTURED_HEADER = re.compile(r"^-+ Captured [\w ]+ -+$", re.MULTILINE)
_FRAME = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+): in (?P<function>\S+)\s*$")
_NATIVE_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+\.py)", line (?P<line>\d+), in (?P<function>\S+)\s*$')


def is_test_file(relative: str) -> bool:
    """Whether a workspace path is part of the tests: under ``tests/``/``test/``, ``test_*.py``, ``*_test.py``,
    ``conftest.py``, or a pytest configuration file."""
    parts = relative.replace("\\", "/").split("/")
    name = parts[-1]
    return (
        any(part in TEST_FOLDERS for part in parts[:-1])
        or name.startswith("test_")
        or name.endswith(("_test.py", "_test.go", ".test.js", ".test.ts", ".spec.js", ".spec.ts"))
        or name in ("conftest.py", "pytest.ini")
    )


@dataclass(frozen=True, slots=True)
class TestCommand:
    """How a project runs its tests.

    Attributes:
        command: the shell command, as the user would type it (``python3 -m pytest``).
        kind: ``pytest`` (per-test results), or ``other`` (the exit status only).
        source: where it was found, for people ("pytest.ini", "cortana.yml test:").
    """

    __test__ = False  # not a pytest class

    command: str
    kind: str
    source: str

    def selected(self, tests: Sequence[str], report_file: Path | None, plugin: str | None = None) -> str:
        """The command for ``tests`` only (all when empty), with pytest's JUnit report written to ``report_file``
        (and ``plugin`` loaded)."""
        if self.kind != "pytest":
            return self.command
        extra = self.arguments(tests, plugin)
        if report_file is not None:
            extra.insert(len(extra) - len(tests), f"--junit-xml={report_file}")
        return " ".join([self.command, *(shlex.quote(part) for part in extra)])

    def arguments(self, tests: Sequence[str], plugin: str | None = None) -> list[str]:
        """What Cortana adds to pytest's command line to run ``tests`` (all when empty) and read the results."""
        extra = [
            "-q",
            "-p",
            "no:cacheprovider",
            "--tb=short",
            "-o",
            "junit_family=xunit1",
            "-o",
            "junit_logging=system-err",
            "--continue-on-collection-errors",
        ]
        if plugin:
            extra += ["-p", plugin]
        return [*extra, *tests]


def find_test_command(root: Path, configured: str | None = None) -> TestCommand | None:
    """How the project in ``root`` runs its tests; None when it has none that Cortana can find."""
    if configured:
        kind = "pytest" if re.search(r"(^|\s|/)(pytest|py\.test)(\s|$)|-m pytest\b", configured) else "other"
        return TestCommand(configured.strip(), kind, "cortana.yml test:")
    pytest_source = _pytest_source(root)
    if pytest_source is not None:
        return TestCommand(f"{shlex.quote(_python(root))} -m pytest", "pytest", pytest_source)
    package = _read_json(root / "package.json")
    script = (package.get("scripts") or {}).get("test") if isinstance(package, dict) else None
    if isinstance(script, str) and script.strip() and "no test specified" not in script:
        return TestCommand("npm test", "other", "package.json scripts.test")
    if (root / "go.mod").is_file():
        return TestCommand("go test ./...", "other", "go.mod")
    if (root / "Cargo.toml").is_file():
        return TestCommand("cargo test", "other", "Cargo.toml")
    makefile = root / "Makefile"
    if makefile.is_file() and re.search(r"^test\s*:", _read_text(makefile), re.MULTILINE):
        return TestCommand("make test", "other", "Makefile test:")
    return None


def _pytest_source(root: Path) -> str | None:
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(_read_text(pyproject))
        except tomllib.TOMLDecodeError:
            data = {}
        if "pytest" in (data.get("tool") or {}):
            return "pyproject.toml [tool.pytest]"
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        parser = configparser.ConfigParser()
        try:
            parser.read_string(_read_text(root / name))
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            return f"{name} [{section}]"
    if (root / "conftest.py").is_file():
        return "conftest.py"
    for folder in (*(root / name for name in TEST_FOLDERS), root):
        if folder.is_dir() and (any(folder.glob("test_*.py")) or any(folder.glob("*_test.py"))):
            return f"{folder.relative_to(root).as_posix() if folder != root else '.'}/test_*.py"
    return None


def _python(root: Path) -> str:
    """The project's own virtual environment's Python; else the first of ``python3`` and Cortana's own Python
    that has pytest (Cortana may live in a virtual environment of its own)."""
    for name in (".venv", "venv"):
        candidate = root / name / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    system = shutil.which("python3")
    if system is not None and _has_pytest(system):
        return "python3"
    return sys.executable if _has_pytest(sys.executable) else "python3"


def _has_pytest(python: str) -> bool:
    try:
        # from /: `-c` puts the current folder first on the path, and a pytest.py in the workspace would run here
        # unconfined (-I would also leave out the user's site-packages, where pytest may be)
        done = run_kept(keeper_argv([python, "-c", "import pytest"]), cwd="/", timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _read_text(path: Path) -> str:
    try:
        return _read_bounded(path, 4_000_000).decode("utf-8")[:1_000_000]
    except (OSError, UnicodeDecodeError):
        return ""


class _TooLarge(OSError):
    """A file over the bound it is read up to (:func:`_read_bounded`); ``size`` is its size in bytes."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(f"{path} is {size:,} bytes, over the {limit:,} read of it")
        self.size = size
        self.limit = limit


def _read_bounded(path: Path, limit: int = MAX_REPORT_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, read up to ``limit``.

    Raises:
        _TooLarge: the file is over ``limit`` (nothing of it is read).
        OSError: it cannot be read, or it is not a regular file (a FIFO the tests left there would block).
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(f"{path} is not a regular file")
        if status.st_size > limit:
            raise _TooLarge(path, status.st_size, limit)
        data = file.read(status.st_size + 1)  # one past its size: a file that grows meanwhile is seen to
    if len(data) > limit:
        raise _TooLarge(path, len(data), limit)
    return data


def _read_json(path: Path) -> object:
    try:
        return json.loads(_read_text(path) or "null")
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a failure's traceback inside the project: ``file:line in function``."""

    file: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class Failure:
    """A test that failed (or could not be collected).

    Attributes:
        test: its id (``tests/test_x.py::test_y``; a file for a collection error).
        message: the error's message (``AssertionError: assert 107 == 107.1``).
        frames: the traceback's frames inside the project, outermost first.
        details: the end of the failure's text, bounded.
        printed: the end of what the test wrote to stderr (``findtext: error: unrecognized arguments: -i``),
            bounded.
    """

    test: str
    message: str
    frames: tuple[Frame, ...] = ()
    details: str = ""
    printed: str = ""

    @property
    def file(self) -> str:
        """The test's file."""
        return self.test.split("::", 1)[0]

    @property
    def name(self) -> str:
        """The test function's name (without parameters or class)."""
        return self.test.split("::")[-1].split("[", 1)[0]

    @property
    def reached(self) -> tuple[int, bool] | None:
        """How far the test got: the line of its own file where it stopped, and whether it stopped there on an
        assertion (the code it called ran to its end and gave a wrong value) rather than an error raised on the
        way; None when the traceback does not show the test's own line."""
        own = next((frame for frame in self.frames if frame.file == self.file), None)
        if own is None:
            return None
        return own.line, self.message.startswith("AssertionError") or self.message.startswith("assert ")


TRACE_PLUGIN = """\
# Cortana's call tracer for pytest: which functions of the project each test runs (for fault localization), and,
# for a test that fails, what the project's functions were called with and gave back (for the fix's feedback),
# and which lines of the project's code outside the tests the failing and the passing tests ran (the spectrum).
import dis, json, os, reprlib, sys, threading

import pytest

_ROOT = os.path.realpath({root!r}) + os.sep
_OUT = {out!r}
_CALLS = {{}}
_VALUES = {{}}
_LINES = {{}}  # (file, line) -> [failing tests that ran it, passing tests that ran it]
_RAN = [0, 0]  # failing tests, passing tests
_CODE = {{}}  # code object -> its file relative to the root, or None when it is not the project's code
_MOST = 12
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8
_RETURNS = {{dis.opmap[name] for name in (  # where a frame stops when it returns or yields (3.13: at RESUME)
    "RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RESUME",
    "INSTRUMENTED_RETURN_VALUE", "INSTRUMENTED_RETURN_CONST", "INSTRUMENTED_YIELD_VALUE", "INSTRUMENTED_RESUME",
) if name in dis.opmap}}


def _is_test(path):
    name = os.path.basename(path)
    parts = path.split(os.sep)
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or "tests" in parts[:-1]


def _shown(value):
    try:
        return _SHORT.repr(value)
    except Exception:
        return "<" + type(value).__name__ + ">"


def _arguments(frame):
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
    shown = []
    for name in code.co_varnames[:count]:
        if name in frame.f_locals:
            value = frame.f_locals[name]
            shown.append(name + "=" + ("<" + type(value).__name__ + ">" if name in ("self", "cls") else _shown(value)))
    return ", ".join(shown)


def _ours(code):
    try:
        return _CODE[code]
    except KeyError:
        path = code.co_filename
        relative = path[len(_ROOT):] if path.startswith(_ROOT) else None
        if relative is not None and (_is_test(relative) or "site-packages" in relative or relative.startswith(".")):
            relative = None
        _CODE[code] = relative
        return relative


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    seen = set()
    values = []
    open_calls = {{}}
    lines = set()
    add = lines.add

    def line(frame, event, arg):
        if event == "line":
            add((_CODE[frame.f_code], frame.f_lineno))
        return line

    def trace(frame, event, arg):
        relative = _ours(frame.f_code)
        if relative is None:
            return None
        add((relative, frame.f_code.co_firstlineno))
        return line

    def profile(frame, event, arg):
        path = frame.f_code.co_filename
        if not path.startswith(_ROOT) or event not in ("call", "return"):
            return
        relative = path[len(_ROOT):]
        if event == "call":
            seen.add((relative, frame.f_code.co_firstlineno))
            if len(values) < _MOST and not _is_test(relative) and not frame.f_code.co_name.startswith("<"):
                open_calls[id(frame)] = len(values)
                name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
                values.append([relative, frame.f_code.co_firstlineno, name, _arguments(frame), None, None])
        else:
            at = open_calls.pop(id(frame), None)
            if at is not None:
                code, last = frame.f_code.co_code, frame.f_lasti
                if arg is None and 0 <= last < len(code) and code[last] not in _RETURNS:
                    values[at][5] = "an exception"  # left by an exception: no value came back
                else:
                    values[at][4] = _shown(arg)

    sys.setprofile(profile)
    sys.settrace(trace)
    threading.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(None)
        threading.settrace(None)
        sys.setprofile(None)
        _CALLS[item.nodeid] = sorted(seen)
        item._cortana_values = values
        item._cortana_lines = lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and not report.skipped:
        at = 0 if report.failed else 1
        _RAN[at] += 1
        for key in getattr(item, "_cortana_lines", ()):
            counts = _LINES.get(key)
            if counts is None:
                counts = _LINES[key] = [0, 0]
            counts[at] += 1
    if report.when == "call" and report.failed:
        values = getattr(item, "_cortana_values", [])
        if call.excinfo is not None:
            raised = type(call.excinfo.value).__name__
            through = set()
            try:
                for entry in call.excinfo.traceback:
                    code = entry.frame.code.raw
                    through.add((os.path.realpath(code.co_filename), code.co_firstlineno))
            except Exception:
                pass  # a traceback pytest cannot walk: the calls keep "an exception"
            for row in values:
                if row[5] is not None and (os.path.realpath(_ROOT + row[0]), row[1]) in through:
                    row[5] = raised
        _VALUES[item.nodeid] = values


def pytest_sessionfinish(session):
    with open(_OUT, "w", encoding="utf-8") as handle:
        lines = [[file, line, counts[0], counts[1]] for (file, line), counts in _LINES.items() if counts[0]]
        json.dump({{"calls": _CALLS, "values": _VALUES, "lines": lines, "ran": _RAN}}, handle)
"""
"""A pytest plugin (loaded with ``-p``, from a temporary folder) that records, for each test, the functions of the
project it called (``sys.setprofile``: file and first line), and for each failing test the first calls of the
project's functions outside the tests, with their arguments and what they returned, shown short (``reprlib``)."""


@dataclass(frozen=True, slots=True)
class CallValue:
    """One call of a project's function in a failing test: what it was given and what it gave back.

    Attributes:
        file, line: the function (its file and first line).
        name: its qualified name.
        arguments: ``name=value`` pairs, each shown short.
        returned: what it returned, shown short; ``None`` when it raised.
        raised: the name of the exception it raised (``"an exception"`` when the failing test's own error did not
            pass through it); ``None`` when it returned.
    """

    file: str
    line: int
    name: str
    arguments: str
    returned: str | None
    raised: str | None = None


@dataclass(slots=True)
class TestReport:
    """What one test run showed.

    Attributes:
        ok: every selected test passed (exit status 0).
        passed: the ids of the tests that passed (pytest only).
        failures: the tests that failed or could not be collected.
        output: the end of what the command printed.
        seconds: how long it ran.
        timed_out: it was stopped at its time limit.
        detailed: per-test results were read (pytest's report); else only ``ok`` and ``output`` mean anything.
        calls: for a traced run, each test's id -> the (file, first line) of the project's functions it called.
        values: for a traced run, each failing test's id -> its first calls of the project's functions, with what
            they were given and gave back.
        lines: for a traced run, each line of the project's code outside the tests that a failing test ran ->
            (failing tests that ran it, passing tests that ran it); a function's first line counts its calls.
        ran: for a traced run, (failing tests, passing tests) the spectrum counted.
    """

    __test__ = False

    ok: bool
    passed: set[str] = field(default_factory=set)
    failures: list[Failure] = field(default_factory=list)
    output: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    detailed: bool = False
    calls: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    values: dict[str, list[CallValue]] = field(default_factory=dict)
    lines: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    ran: tuple[int, int] = (0, 0)

    def suspicion(self, file: str, line: int) -> float:
        """How suspect a line is from the spectrum (Ochiai: failing tests that ran it / sqrt(failing tests x tests
        that ran it)); 0 for a line no failing test ran, or without a spectrum."""
        failing, passing = self.lines.get((file, line), (0, 0))
        if not failing or not self.ran[0]:
            return 0.0
        return float(failing / math.sqrt(self.ran[0] * (failing + passing)))

    @property
    def failed(self) -> set[str]:
        """The ids of the tests that failed."""
        return {failure.test for failure in self.failures}

    def summary(self) -> str:
        """``3 passed, 1 failed`` (or the exit status for runners without per-test results)."""
        if self.timed_out:
            return "stopped at the time limit"
        if not self.detailed:
            return "passed" if self.ok else "failed"
        parts = [f"{len(self.passed)} passed"] + ([f"{len(self.failures)} failed"] if self.failures else [])
        return ", ".join(parts)


async def run_tests(
    command: TestCommand,
    folder: Path,
    environment: Mapping[str, str],
    *,
    tests: Sequence[str] = (),
    timeout: float = 300.0,
    trace: bool = False,
    sandbox: Sandbox | None = None,
    warm: WarmTests | None = None,
) -> TestReport:
    """Run ``command`` (only ``tests`` when given) in ``folder``, bounded in time and output.

    With ``trace`` (pytest only), each test's calls of the project's functions are recorded too
    (:attr:`TestReport.calls`). With ``sandbox`` (for ``folder``), the run is confined by the kernel. With ``warm``
    (a :class:`~cortana.repair.warm.WarmTests` on ``folder``), a run without ``trace`` is made by its warm process
    where it still runs, else cold.
    """
    started = time.perf_counter()
    if warm is not None and not trace and command.kind == "pytest":
        shape = python_of(command.command)
        ran = await warm.run([*shape[1], *command.arguments(tests)], timeout) if shape is not None else None
        if ran is not None:
            seconds = time.perf_counter() - started
            output = ran.output if len(ran.output) <= MAX_OUTPUT else ran.output[-MAX_OUTPUT:]
            if ran.returncode is None:
                return TestReport(False, output=output, seconds=seconds, timed_out=True)
            report = TestReport(ran.returncode == 0, output=output, seconds=seconds)
            _read_junit_file(ran.report, folder, report)
            with contextlib.suppress(OSError):
                ran.report.unlink()
            return report
    with tempfile.TemporaryDirectory(prefix="cortana-tests-") as scratch:
        report_file = Path(scratch) / "report.xml" if command.kind == "pytest" else None
        env = pytest_environment(folder, environment) if command.kind == "pytest" else dict(environment)
        shell_command = command.selected(tests, report_file)
        if trace and command.kind == "pytest":
            plugin = TRACE_PLUGIN.format(root=str(folder), out=str(Path(scratch) / "calls.json"))
            (Path(scratch) / "cortana_trace.py").write_text(plugin, encoding="utf-8")
            env["PYTHONPATH"] = os.pathsep.join([scratch, env["PYTHONPATH"]])
            shell_command = command.selected(tests, report_file, plugin="cortana_trace")
        # (no check after for protected paths: the folder is a scratch copy, thrown away)
        confinement = (
            sandbox.confined(Path(scratch), watch=False) if sandbox is not None else contextlib.nullcontext(None)
        )
        with confinement as confined:
            if confined is not None:
                env = confined.environment(env)
            finished = await run_shell(
                shell_command, folder, env, timeout, limit=MAX_OUTPUT, hint="the run's middle", confined=confined
            )
        seconds = time.perf_counter() - started
        if finished.refused is not None:
            return TestReport(False, output=f"The sandbox could not be set up: {finished.refused}", seconds=seconds)
        if finished.timed_out:
            return TestReport(False, output=finished.output, seconds=seconds, timed_out=True)
        report = TestReport(finished.returncode == 0, output=finished.output, seconds=seconds)
        if report_file is not None:
            _read_junit_file(report_file, folder, report)
        calls_file = Path(scratch) / "calls.json"
        if trace and calls_file.is_file():
            _read_trace(calls_file, report)
        return report


def pytest_environment(folder: Path, environment: Mapping[str, str]) -> dict[str, str]:
    """The environment pytest runs with in ``folder``: the copy's code first on the path (its ``src/`` too), even
    where the project is installed in editable mode, no bytecode written into it, and one hash seed (isodate's
    tests, parametrized over a set, had other ids in each run, so 40 of its tests looked broken by a fix)."""
    env = dict(environment)
    paths = [str(folder), str(folder / "src"), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    env.setdefault("PYTHONHASHSEED", "0")  # a test parametrized over a set has the same ids in every run
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _read_junit_file(path: Path, folder: Path, report: TestReport) -> None:
    """Fill ``report`` from pytest's JUnit XML at ``path``; one over :data:`MAX_REPORT_BYTES` is left unread, and
    the run's output says so (the workflow then goes by the exit status and the output, as for other runners)."""
    try:
        data = _read_bounded(path)
    except _TooLarge as over:
        report.output += (
            f"\n(Cortana left the run's JUnit report unread: it is {over.size / 2**20:,.0f} MiB, over the "
            f"{over.limit >> 20} MiB it reads of one, so only the exit status and this output count. Tests that print "
            "without end fill it, their stderr kept for each; quiet them, or name fewer tests in cortana.yml `test:`.)"
        )
        return
    except OSError:
        return  # no report: pytest stopped before it wrote one
    read_junit(data, folder, report)


def _read_trace(path: Path, report: TestReport) -> None:
    """Fill ``report``'s calls, values and lines from the tracer's file (written by the project's tests: read as
    untrusted, bounded, every field checked)."""
    try:
        data = json.loads(_read_bounded(path).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return
    if not isinstance(data, dict):
        return
    report.calls, report.values = _calls_and_values(data)
    try:
        ran = data.get("ran") or [0, 0]
        report.ran = (int(ran[0]), int(ran[1]))
        report.lines = {(str(row[0]).replace(os.sep, "/"), int(row[1])): (int(row[2]), int(row[3]))
                        for row in (data.get("lines") or [])[:500_000]}  # fmt: skip
    except (AttributeError, IndexError, TypeError, ValueError):
        report.ran, report.lines = (0, 0), {}


def _calls_and_values(data: dict[str, Any]) -> tuple[dict[str, set[tuple[str, int]]], dict[str, list[CallValue]]]:
    calls: dict[str, set[tuple[str, int]]] = {}
    values: dict[str, list[CallValue]] = {}
    try:
        for test, pairs in (data.get("calls") or {}).items():
            calls[str(test)] = {(str(file).replace(os.sep, "/"), int(line)) for file, line in pairs}
        for test, rows in (data.get("values") or {}).items():
            values[str(test)] = [
                CallValue(str(row[0]).replace(os.sep, "/"), int(row[1]), str(row[2])[:200], str(row[3])[:400],
                          None if row[4] is None else str(row[4])[:200],
                          None if len(row) < 6 or row[5] is None else str(row[5])[:80])
                for row in rows[:20]
            ]  # fmt: skip
    except (AttributeError, IndexError, TypeError, ValueError):
        return calls, {}
    return calls, values


def read_junit(data: bytes, folder: Path, report: TestReport) -> None:
    """Fill ``report``'s per-test results from pytest's JUnit XML (xunit1: with each test's file)."""
    try:
        root = ElementTree.fromstring(data)  # our own pytest's report, from our own temporary folder
    except ElementTree.ParseError:
        return
    report.detailed = True
    for case in root.iter("testcase"):
        test = _test_id(case, folder)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            if case.find("skipped") is None:
                report.passed.add(test)
            continue
        text = problem.text or ""
        message = (problem.get("message") or "").strip()
        if not message or message == "collection failure":
            message = _last_error_line(text)
        printed = _CAPTURED_HEADER.sub("", case.findtext("system-err") or "").strip()[-PRINTED_CHARS:]
        failure = Failure(test, message[:500], tuple(_frames(text, folder)), details=text[-2_000:], printed=printed)
        report.failures.append(failure)
    if report.failures or report.passed:
        report.ok = report.ok and not report.failures


def _test_id(case: ElementTree.Element, folder: Path) -> str:
    """pytest's node id of a JUnit test case (xunit1: ``file`` is where the test function is written, which for a
    test method a class inherits from a mixin in another module is not the module the test runs from)."""
    file = (case.get("file") or "").replace("\\", "/")
    name = case.get("name") or ""
    classname = case.get("classname") or ""
    if not file:  # a collection error: pytest names the module in ``name``
        return name.replace(".", "/") + ".py" if name and not classname else f"{classname}::{name}".strip(":")
    module = file.removesuffix(".py").replace("/", ".")
    if not classname and name == module:  # a module that could not be collected
        return file
    if classname.startswith(module + "."):
        klass = classname[len(module) + 1 :]
    elif classname and classname != module:  # inherited: the module is the longest prefix that is a file
        parts = classname.split(".")
        for at in range(len(parts) - 1, 0, -1):
            candidate = "/".join(parts[:at]) + ".py"
            if (folder / candidate).is_file():
                file, klass = candidate, ".".join(parts[at:])
                break
        else:
            klass = ""
    else:
        klass = ""
    return "::".join(part for part in (file, klass, name) if part)


def _frames(text: str, folder: Path) -> list[Frame]:
    frames: list[Frame] = []
    for line in text.splitlines():
        match = _FRAME.match(line) or _NATIVE_FRAME.match(line)
        if not match:
            continue
        file = match["file"]
        path = Path(file)
        if path.is_absolute():
            try:
                file = path.resolve().relative_to(folder.resolve()).as_posix()
            except ValueError:
                continue  # a frame in the standard library or an installed package
        if file.startswith(("..", "/")) or "site-packages" in file:
            continue
        frames.append(Frame(file, int(match["line"]), match["function"]))
    return frames


def _last_error_line(text: str) -> str:
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    return errors[-1] if errors else (text.strip().splitlines() or [""])[-1]

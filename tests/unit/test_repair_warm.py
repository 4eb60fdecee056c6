"""The warm pytest process (real pytest, the real sandbox): each run sees the copy as it is now, ends at its time
limit, and is not used where forking is unsafe; and the test ids of inherited test methods."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cortana.repair.testrun import find_test_command, pytest_environment, run_tests
from cortana.repair.warm import WarmTests, python_of
from cortana.sandbox.policy import Sandbox
from tests.unit.test_repair import ENV, write

PROJECT = {
    "conftest.py": "",
    "calc/__init__.py": "",
    "calc/ops.py": """
        def add(a, b):
            return a - b
        """,
    "tests/test_ops.py": """
        import time

        from calc.ops import add


        def test_add():
            assert add(2, 3) == 5


        def test_slow():
            time.sleep(30)
        """,
}


async def _warm(project: Path, tests: list[str]) -> WarmTests:
    command = find_test_command(project)
    assert command is not None
    warm = await WarmTests.start(
        command.command, project, pytest_environment(project, ENV), ["--collect-only", "-q", *tests],
        sandbox=Sandbox(project),
    )  # fmt: skip
    assert warm is not None
    return warm


async def test_each_warm_run_imports_the_copy_as_it_is_now(tmp_path: Path) -> None:
    project = write(tmp_path / "p", PROJECT)
    command = find_test_command(project)
    assert command is not None
    warm = await _warm(project, ["tests/test_ops.py::test_add"])
    try:
        before = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_add"], warm=warm)
        assert before.detailed and before.failed == {"tests/test_ops.py::test_add"}
        assert "assert -1 == 5" in before.failures[0].message
        (project / "calc/ops.py").write_text("def add(a, b):\n    return a + b\n")
        after = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_add"], warm=warm)
        assert after.ok and after.passed == {"tests/test_ops.py::test_add"}, after.output
        cold = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_add"])
        assert cold.passed == after.passed and cold.ok == after.ok
        started = time.perf_counter()
        slow = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_slow"], warm=warm, timeout=2)
        assert slow.timed_out and time.perf_counter() - started < 15
        again = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_add"], warm=warm)
        assert again.ok, "a child stopped at its limit leaves the warm process serving"
    finally:
        await warm.aclose()
    assert not warm.alive
    gone = await run_tests(command, project, ENV, tests=["tests/test_ops.py::test_add"], warm=warm)
    assert gone.ok and gone.detailed, "a warm process that is gone: the run is made cold"


async def test_a_project_that_starts_a_thread_on_import_is_not_run_warm(tmp_path: Path) -> None:
    threaded = dict(PROJECT)
    threaded["conftest.py"] = (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    project = write(tmp_path / "p", threaded)
    command = find_test_command(project)
    assert command is not None
    warm = await WarmTests.start(
        command.command, project, pytest_environment(project, ENV), ["--collect-only", "-q", "tests"],
        sandbox=Sandbox(project),
    )  # fmt: skip
    assert warm is None, "forking a process with threads can deadlock: cold runs instead"


@pytest.mark.parametrize(
    ("command", "shape"),
    [
        ("python3 -m pytest", (["python3"], [])),
        ("/p/.venv/bin/python -m pytest -x tests", (["/p/.venv/bin/python"], ["-x", "tests"])),
        ("pytest tests", None),
        ("FOO=1 python -m pytest", None),
        ("make test", None),
    ],
)
def test_only_a_python_dash_m_pytest_command_runs_warm(command: str, shape: object) -> None:
    assert python_of(command) == shape


async def test_an_inherited_test_method_has_the_id_of_the_module_it_runs_from(tmp_path: Path) -> None:
    project = write(
        tmp_path / "p",
        {
            "conftest.py": "",
            "tests/__init__.py": "class Mixin:\n    def test_one(self):\n        assert self.value == 1\n",
            "tests/test_a.py": "from tests import Mixin\n\n\nclass TestA(Mixin):\n    value = 1\n",
            "tests/test_b.py": "from tests import Mixin\n\n\nclass TestB(Mixin):\n    value = 2\n",
        },
    )
    command = find_test_command(project)
    assert command is not None
    report = await run_tests(command, project, ENV)
    assert report.passed == {"tests/test_a.py::TestA::test_one"}
    assert report.failed == {"tests/test_b.py::TestB::test_one"}
    again = await run_tests(command, project, ENV, tests=sorted(report.failed))
    assert again.failed == report.failed, "the id runs that test, and only it"


def test_a_test_the_project_names_anew_in_each_run_is_not_counted_as_broken() -> None:
    from cortana.repair.stages.judge import broke
    from cortana.repair.testrun import Failure, TestReport

    before = TestReport(False, {"t.py::a[x1]", "t.py::b"}, [Failure("t.py::c", "assert 1 == 2")], detailed=True)
    renamed = TestReport(True, {"t.py::a[x7]", "t.py::b", "t.py::c"}, detailed=True)
    assert broke(before, renamed) == 0, "as many passing as before, and c: one id changed, nothing broke"
    worse = TestReport(False, {"t.py::b", "t.py::c"}, [Failure("t.py::a[x1]", "boom")], detailed=True)
    assert broke(before, worse) == 1
    uncollected = TestReport(False, set(), [Failure("tests/test_new.py", "ImportError: x")], detailed=True)
    loaded = TestReport(False, {"tests/test_new.py::one"}, [Failure("tests/test_new.py::two", "assert")], detailed=True)
    assert broke(uncollected, loaded) == 0, "a test of a file that could not load was failing already"


async def test_the_tests_run_with_one_hash_seed(tmp_path: Path) -> None:
    project = write(
        tmp_path / "p",
        {
            "conftest.py": "",
            "tests/test_seed.py": "import os\n\n\ndef test_seed():\n    assert os.environ['PYTHONHASHSEED'] == '0'\n",
        },
    )
    command = find_test_command(project)
    assert command is not None
    assert (await run_tests(command, project, ENV)).ok, "a set's order, and so parametrized ids, is the same each run"

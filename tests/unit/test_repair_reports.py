"""What the fix workflow reads back from a test run is read up to a bound: a run's report comes from the project's
own tests, which may write anything into it."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from cortana.config import child_process_environment
from cortana.repair import find_test_command, run_tests
from cortana.repair.testrun import MAX_REPORT_BYTES

ENV = child_process_environment({})
GIB = 1 << 30

# After pytest has written its JUnit report (and Cortana's tracer its calls.json beside it), the project's own
# conftest grows both to 1 GiB: sparse files, so the disk holds nothing and only a reader pays.
SWOLLEN_REPORTS = """
import os
from pathlib import Path


def pytest_unconfigure(config):
    report = Path(config.option.xmlpath)
    os.truncate(report, 1 << 30)
    calls = report.parent / "calls.json"
    if calls.exists():
        os.truncate(calls, 1 << 30)
"""


async def test_a_one_gib_junit_report_is_left_unread_and_said_so(tmp_path: Path) -> None:
    """Reproduces the report: reading the run's 1 GiB sparse JUnit report whole cost 2.1 GB of memory."""
    project = tmp_path / "p"
    (project / "tests").mkdir(parents=True)
    (project / "conftest.py").write_text(SWOLLEN_REPORTS)
    (project / "tests" / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 3\n")
    command = find_test_command(project)
    assert command is not None and command.kind == "pytest"
    tracemalloc.start()
    try:
        report = await run_tests(command, project, ENV, trace=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"reading the reports took {peak / 2**20:.0f} MiB"
    assert not report.ok and not report.detailed, "per-test results left out: the exit status and output count"
    assert report.calls == {} and report.values == {}, "the swollen call trace is left unread too"
    assert "1,024 MiB" in report.output and f"{MAX_REPORT_BYTES >> 20} MiB" in report.output
    assert "1 failed" in report.output, "the run's own output is kept, before the note"

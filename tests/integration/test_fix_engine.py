"""The fix workflow end to end on the real engine and the bundled 0.5B model: a bug one call away from its test.

``cortana --yes "fix the failing test"`` in a small project whose test calls ``floor_area()``, which calls the
broken ``area()`` in another file. What is checked is what a user sees: the file fixed and nothing else, the
test as it was, the test suite passing, and the diff and the test result in the answer. The model writes its
patches under the grammar built from the code it was shown, so every sample is well-formed; the 0.5B model's
greedy patch also rewrites ``plan.py`` needlessly, and that edit is left out because the tests do not need it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.test_repair import write

ROOMS = {
    "conftest.py": "",
    "rooms/__init__.py": "",
    "rooms/geometry.py": '''
        def area(width, height):
            """The area of a width x height rectangle."""
            return width + height


        def perimeter(width, height):
            return 2 * (width + height)
        ''',
    "rooms/plan.py": """
        from rooms.geometry import area, perimeter


        def floor_area(rooms):
            return sum(area(width, height) for width, height in rooms)


        def wall_length(rooms):
            return sum(perimeter(width, height) for width, height in rooms)
        """,
    "tests/test_plan.py": """
        from rooms.plan import floor_area, wall_length


        def test_floor_area():
            assert floor_area([(2, 3), (4, 5)]) == 26


        def test_wall_length():
            assert wall_length([(2, 3)]) == 10
        """,
}


def test_the_small_model_fixes_a_bug_one_call_away(engine_url: str, engine_key: str, tmp_path: Path) -> None:
    root = write(tmp_path / "rooms-project", ROOMS)
    (root / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\nseed: 1\n")
    plan_before = (root / "rooms/plan.py").read_text()
    test_before = (root / "tests/test_plan.py").read_text()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NO_COLOR": "1", "CORTANA_API_KEY": engine_key}
    done = subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", engine_url,
         "--yes", "fix the failing test"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "Applied to rooms/geometry.py." in done.stdout, done.stdout + done.stderr[-3000:]
    assert "+    return width * height" in done.stdout
    assert (root / "rooms/plan.py").read_text() == plan_before, "an edit the tests do not need is left out"
    assert (root / "tests/test_plan.py").read_text() == test_before
    check = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout

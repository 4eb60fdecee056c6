"""The fix workflow through the real ``cortana`` command on a scripted engine: one-shot, ``cortana fix``, ``/fix``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.integration.test_cli_terminal import PROMPT, spawn_on, text_reply
from tests.unit.test_repair import FIX, ONE_CALL_AWAY, TEST_EDIT, write


def project(tmp_path: Path) -> Path:
    root = write(tmp_path / "shop-project", ONE_CALL_AWAY)
    (root / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    return root


def cortana(root: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root.parent), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "cortana.cli.main", "--engine", "llamacpp", "--base-url", url, *args],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_yes_fix_the_failing_test_finds_tries_and_applies_the_fix(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The samples' order (the small changes that need no model are off: `int -> round` is one of them)."""
    root = project(tmp_path)
    (root / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nfix:\n  per_location: 1\n  mutants: 0\n"
    )
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([TEST_EDIT]), text_reply([FIX]))
    done = cortana(root, scripted_engine.url, "--yes", "fix the failing test")
    assert done.returncode == 0, done.stderr
    assert "+    return round(cents * 0.2)" in done.stdout and "Applied to shop/money.py." in done.stdout
    assert "test_total_rounds_the_vat now passes" in done.stdout
    assert "round(cents * 0.2)" in (root / "shop/money.py").read_text()
    assert "== 2519" in (root / "tests/test_invoice.py").read_text(), "the test that judged it is as it was"
    assert "fix " in done.stderr and "patch 1: the tests pass" in done.stderr, "progress a person can follow"
    requests = [r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions"]
    assert all("grammar" in body for body in requests)
    assert requests[0]["grammar"].startswith('root ::= d0\nd0 ::= "def vat"'), "first: vat, written again whole"
    assert requests[1]["grammar"].startswith("root ::= d0 d1"), "then the functions shown, together"
    feedback = requests[2]["messages"][-1]["content"]
    assert requests[2]["grammar"].startswith('root ::= d0\nd0 ::= "def vat"'), "then vat, told what the tests saw"
    assert "While the failing tests ran, vat was called like this:" in feedback and "vat(cents=" in feedback
    edits = next(body for body in requests if "FILE: shop/money.py" in body["grammar"])
    assert requests.index(edits) > 2, "then edits anywhere in the code shown"
    assert not any("FILE: tests/" in body["grammar"] for body in requests), "the tests are not offered to patch"


def test_a_one_token_bug_is_fixed_by_a_small_change_before_any_sample(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The tests' line spectrum ranks the small changes, so they come first: the fix needs no model call."""
    root = project(tmp_path)
    (root / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([TEST_EDIT]))
    done = cortana(root, scripted_engine.url, "--yes", "fix the failing test")
    assert done.returncode == 0, done.stderr
    assert "+    return round(cents * 0.2)" in done.stdout and "Applied to shop/money.py." in done.stdout
    assert "most suspect first (" in done.stderr and "shop/money.py:3" in done.stderr and "no model" in done.stderr
    assert [r for r in scripted_engine.requests if r.path == "/v1/chat/completions"] == []


def test_without_a_terminal_or_yes_nothing_changes(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The tests run confined in the scratch copy (no question), the fix is found, and writing it is refused:
    nobody is there to approve it. The exit status says it was not applied."""
    root = project(tmp_path)
    before = (root / "shop/money.py").read_text()
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([FIX]))
    done = cortana(root, scripted_engine.url, "fix", "the VAT rounding")
    assert done.returncode == 1 and "Not applied: writing it was not allowed" in done.stdout, done.stdout
    assert (root / "shop/money.py").read_text() == before


def test_without_the_sandbox_running_the_tests_is_asked(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = project(tmp_path)
    (root / "cortana.yml").write_text("memory:\n  recall: false\ngraphify:\n  enabled: false\n")
    own = root.parent / ".config" / "cortana"  # the user's own cortana.yml ($HOME is the project's parent)
    own.mkdir(parents=True)
    (own / "cortana.yml").write_text("sandbox:\n  enabled: false\n")
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([FIX]))
    done = cortana(root, scripted_engine.url, "fix", "the VAT rounding")
    assert done.returncode == 1 and "was not allowed; nothing was tried" in done.stdout, done.stdout


def test_a_question_is_not_sent_to_the_workflow(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = project(tmp_path)
    scripted_engine.add("POST", "/v1/chat/completions", text_reply(["vat() rounds down."]))
    done = cortana(root, scripted_engine.url, "--yes", "which function computes the VAT?")
    assert done.returncode == 0 and "vat() rounds down." in done.stdout and "fix " not in done.stderr


def test_slash_fix_asks_to_run_the_tests_and_to_write_showing_the_diff(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = project(tmp_path)
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([FIX]))
    child = spawn_on(scripted_engine.url, root, home=tmp_path)
    child.sendline("/fix")  # the tests run confined in the scratch copy: not asked
    child.expect_exact("? edit_file")
    child.expect_exact("path: shop/money.py")
    child.expect_exact("+    return round(cents * 0.2)")
    child.sendline("y")
    child.expect_exact("Applied to shop/money.py.")
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    assert "round(cents * 0.2)" in (root / "shop/money.py").read_text()


def test_a_fix_that_finds_nothing_says_what_it_tried_and_what_next(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No tool loop takes over (a small model's loop answered "I cannot directly change the code"): the answer says
    what was tried and what to try next; an attempt that fixed nothing is not shown as the closest."""
    root = project(tmp_path)
    (root / "cortana.yml").write_text(
        "memory:\n  recall: false\ngraphify:\n  enabled: false\nfix:\n  samples: 1\n  per_location: 0\n  rounds: 1\n"
        "  rewrite: false\n  mutants: 0\n"
    )
    wrong = FIX.replace("round(cents * 0.2)", "int(cents * 0.2) - 1")
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([wrong]))
    done = cortana(root, scripted_engine.url, "--yes", "fix the failing test")
    assert done.returncode == 1, done.stderr
    assert "None of the 1 distinct patches" in done.stdout and "nothing was changed" in done.stdout
    assert "The closest attempt:" not in done.stdout and "int(cents * 0.2) - 1" not in done.stdout, (
        "an attempt that made no failing test pass is not offered as the closest"
    )
    assert "Next:" in done.stdout
    requests = [r.body for r in scripted_engine.requests if r.path == "/v1/chat/completions"]
    assert not any(body.get("tools") for body in requests), "no tool loop took over"
    assert "The assistant takes it from here" not in done.stderr


def test_an_untrusted_folders_test_command_is_not_run_even_under_yes(scripted_engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Reproduces the report: `test:` in a repository's cortana.yml ran under --yes with no trust prompt. It is a
    command the folder's config runs, so it needs the folder's trust like an MCP server; untrusted, it is ignored
    with a line saying so, and the tests are found from the project's files."""
    root = project(tmp_path)
    marker = tmp_path / "TEST-COMMAND-RAN"
    (root / "cortana.yml").write_text(
        f"memory:\n  recall: false\ngraphify:\n  enabled: false\ntest: touch {marker}; python3 -m pytest\n"
    )
    scripted_engine.add("POST", "/v1/chat/completions", text_reply([FIX]))
    done = cortana(root, scripted_engine.url, "--yes", "fix", "the VAT rounding")
    assert not marker.exists(), done.stderr
    assert "ignoring test in" in done.stderr and "not trusted" in done.stderr, done.stderr
    assert done.returncode == 0 and "Applied to shop/money.py." in done.stdout, done.stdout

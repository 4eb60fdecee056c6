"""Learning benchmark: ten tasks on one small invoicing project, each asked twice in different words.

Every task runs on a fresh copy of ``repo/`` (see :func:`copy_repo`): the runner copies the fixture, calls the
task's ``setup`` on the copy (when it has one), lets the agent work there with the first prompt, checks the
result, and does the same again, on another fresh copy, with the second prompt. No task depends on another.

The fixture has two latent bugs that its own test suite does not exercise (``bulk_discount_percent`` returns the
lowest tier reached, ``is_overdue`` counts the due date itself as late) and lacks one function
(``numbering.parse_invoice_number``); the tasks that need a failing test drop their own test file in with
``setup``, so ``python -m pytest -q`` passes on an untouched copy.

Checks, never by eye:

- ``answer`` tasks: the final answer must name every required fact (one alternative of each group) and none of
  the distractors, case-insensitively, as whole words (``3`` is not found in ``30`` or ``0.3``), ignoring
  backticks, asterisks, quotes and Markdown-escaped underscores. The distractors are what an answer that lists
  everything in sight would name, e.g. a function whose body mentions the target in a comment without calling it.
- ``change`` tasks: the task's test file and every original test and config file must be as they were (no
  ``conftest.py`` added), then ``python -m pytest -q TESTFILE`` and the whole suite must pass in the copy
  (60 s each at most, third-party pytest plugins off).

Each task carries a ``reference`` (a correct answer, or a function that applies a correct fix to a copy) and
``decoys`` (plausible wrong answers) for ``selfcheck.py``.

No ``from __future__ import annotations`` here: runners load this file with ``importlib`` without registering it
in ``sys.modules``, and dataclasses then cannot resolve string annotations.
"""

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).parent / "repo"

Needle = str | tuple[str, ...]  # one word, or alternatives of which any one will do


@dataclass(frozen=True)
class LearningTask:
    """One task: two wordings of the same request, how to prepare the copy, and how to judge the result."""

    name: str
    prompts: tuple[str, str]  # first wording, second (different) wording of the same task
    check: Callable[[str, Path], bool]  # (final answer text, the repo copy after the run) -> right?
    kind: str  # "answer" or "change"
    setup: Callable[[Path], None] | None = None  # prepares the fresh copy (e.g. drops in a failing test file)
    reference: str | Callable[[Path], None] = ""  # a correct answer, or a function that applies a correct fix
    decoys: tuple[str, ...] = ()  # wrong answers the check must reject (answer tasks)


def copy_repo(destination: Path) -> Path:
    """Copy the fixture repository to ``destination`` (which must not exist), without caches."""
    shutil.copytree(REPO, destination, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc"))
    return destination


# --- answer checks ---------------------------------------------------------------------------------------------


def normalize(text: str) -> str:
    """Lower-case ``text``, drop Markdown emphasis, code marks and quotes, and collapse whitespace."""
    text = text.lower().replace("\\_", "_")
    text = re.sub("[`*\"'\u201c\u201d\u2018\u2019]", " ", text)
    return " ".join(text.split())


def _found(text: str, word: str) -> bool:
    """Whether ``word`` occurs in the normalized ``text`` as a whole word (not inside a longer name or number)."""
    word = " ".join(word.lower().split())
    pattern = r"(?<!\w)(?<!\d\.)" + re.escape(word) + r"(?!\w)(?!\.\d)"
    return re.search(pattern, text) is not None


def _alternatives(needle: Needle) -> tuple[str, ...]:
    return (needle,) if isinstance(needle, str) else needle


def mentions_all(answer: str, *needles: Needle) -> bool:
    """Whether ``answer`` names every needle (for a tuple of alternatives: at least one of them)."""
    text = normalize(answer)
    return all(any(_found(text, word) for word in _alternatives(needle)) for needle in needles)


def mentions_none(answer: str, *needles: Needle) -> bool:
    """Whether ``answer`` names none of the needles (nor any alternative of them)."""
    text = normalize(answer)
    return not any(_found(text, word) for needle in needles for word in _alternatives(needle))


def module_file(name: str) -> tuple[str, ...]:
    """Ways to name the module ``invoicing/NAME.py`` that cannot be mistaken for the English word NAME."""
    return (f"{name}.py", f"invoicing.{name}", f"invoicing/{name}", f"{name} module", f"module {name}")


def answer_check(required: tuple[Needle, ...], forbidden: tuple[Needle, ...] = ()) -> Callable[[str, Path], bool]:
    """A check that passes when the answer names everything ``required`` and nothing ``forbidden``."""

    def check(answer: str, repo: Path) -> bool:
        return bool(answer.strip()) and mentions_all(answer, *required) and mentions_none(answer, *forbidden)

    return check


# --- change checks ---------------------------------------------------------------------------------------------

_CONFIG_FILES = ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")


def run_pytest(repo: Path, *args: str, timeout: float = 60) -> bool:
    """Whether ``python -m pytest -q ARGS`` passes in ``repo`` (third-party plugins off, no cache written)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTHONPATH", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    try:
        result = subprocess.run(command, cwd=repo, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


def tests_untouched(repo: Path, test_file: str, test_text: str) -> bool:
    """Whether the task's test file, the fixture's tests and its configuration are as they were, with no conftest."""
    if _read(repo / test_file) != test_text:
        return False
    originals = [*(REPO / "tests").glob("*.py"), *(REPO / name for name in _CONFIG_FILES)]
    for original in originals:
        relative = original.relative_to(REPO)
        if _read(original) != _read(repo / relative):
            return False
    return not any(repo.rglob("conftest.py"))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return None


def change_check(test_file: str, test_text: str) -> Callable[[str, Path], bool]:
    """A check that passes when the tests are untouched and both the task's test file and the whole suite pass."""

    def check(answer: str, repo: Path) -> bool:
        return tests_untouched(repo, test_file, test_text) and run_pytest(repo, test_file) and run_pytest(repo)

    return check


def drop_in(relative: str, text: str) -> Callable[[Path], None]:
    """A setup that writes ``text`` to ``relative`` in the copy."""

    def setup(repo: Path) -> None:
        (repo / relative).write_text(text, encoding="utf-8")

    return setup


def replace_in(relative: str, old: str, new: str) -> Callable[[Path], None]:
    """A reference fix that replaces the one occurrence of ``old`` with ``new`` in ``relative``."""

    def apply(repo: Path) -> None:
        path = repo / relative
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise ValueError(f"{relative}: expected exactly one occurrence of {old!r}")
        path.write_text(text.replace(old, new), encoding="utf-8")

    return apply


# --- the tasks' own test files ---------------------------------------------------------------------------------

DUE_DATES_TEST = """\
from datetime import date

from invoicing.due_dates import due_date_for, is_overdue


def test_due_date_is_thirty_days_after_issue() -> None:
    assert due_date_for(date(2024, 1, 1)) == date(2024, 1, 31)


def test_overdue_the_day_after_the_due_date() -> None:
    assert is_overdue(date(2024, 1, 31), today=date(2024, 2, 1))


def test_not_overdue_on_the_due_date() -> None:
    assert not is_overdue(date(2024, 1, 31), today=date(2024, 1, 31))
"""

BULK_DISCOUNT_TEST = """\
from decimal import Decimal

from helpers import make_invoice
from invoicing.discounts import bulk_discount_percent


def test_small_orders() -> None:
    assert bulk_discount_percent(9) == Decimal("0")
    assert bulk_discount_percent(10) == Decimal("2")
    assert bulk_discount_percent(49) == Decimal("2")


def test_fifty_units_earn_five_percent() -> None:
    assert bulk_discount_percent(50) == Decimal("5")
    assert bulk_discount_percent(99) == Decimal("5")


def test_a_hundred_units_earn_ten_percent() -> None:
    assert bulk_discount_percent(100) == Decimal("10")
    assert bulk_discount_percent(150) == Decimal("10")


def test_large_order_invoice() -> None:
    invoice = make_invoice(quantity=150, unit_price="2.00", region="US")
    assert invoice.net() == Decimal("270.00")
"""

PARSE_NUMBER_TEST = """\
import pytest

from invoicing.numbering import format_invoice_number, parse_invoice_number


def test_parse_invoice_number() -> None:
    assert parse_invoice_number("INV-00042") == 42


def test_round_trip() -> None:
    for sequence in (1, 7, 12345):
        assert parse_invoice_number(format_invoice_number(sequence)) == sequence


@pytest.mark.parametrize("text", ["XYZ-00001", "INV-", "INV-abc", "INV00042", ""])
def test_not_an_invoice_number(text: str) -> None:
    with pytest.raises(ValueError):
        parse_invoice_number(text)
"""

TAX_NL_TEST = """\
from decimal import Decimal

from helpers import make_invoice
from invoicing.taxes import tax_for, tax_rate


def test_netherlands_rate() -> None:
    assert tax_rate("NL") == Decimal("0.21")
    assert tax_rate("nl") == Decimal("0.21")


def test_netherlands_tax() -> None:
    assert tax_for("NL", Decimal("100.00")) == Decimal("21.00")


def test_netherlands_invoice() -> None:
    assert make_invoice(quantity=2, unit_price="10.00", region="NL").total() == Decimal("24.20")


def test_other_regions_unchanged() -> None:
    assert tax_rate("DE") == Decimal("0.19")
    assert tax_rate("FR") == Decimal("0.20")
"""

PARSE_NUMBER_SOLUTION = '''

def parse_invoice_number(number: str) -> int:
    """The sequence number of an invoice number, e.g. ``INV-00042`` gives ``42``."""
    prefix, dash, digits = number.partition("-")
    if prefix != INVOICE_PREFIX or not dash or not digits.isdigit():
        raise ValueError(f"not an invoice number: {number!r}")
    return int(digits)
'''


def _append_parse_invoice_number(repo: Path) -> None:
    path = repo / "invoicing" / "numbering.py"
    path.write_text(path.read_text(encoding="utf-8") + PARSE_NUMBER_SOLUTION, encoding="utf-8")


# --- the tasks -------------------------------------------------------------------------------------------------

TASKS: list[LearningTask] = [
    LearningTask(
        name="callers-of-round-money",
        kind="answer",
        prompts=(
            "Which functions in the invoicing package call round_money? "
            "For each one, give the function name and the module it is in.",
            "I'm about to change how amounts are rounded in invoicing/money.py. Before I touch round_money, "
            "tell me every function of the package (not the tests) whose code actually calls it, and its file.",
        ),
        # The callers are line_total (line_items.py) and apply_discount (discounts.py). format_amount mentions
        # round_money in its docstring and tax_for in a TODO comment: neither calls it.
        check=answer_check(
            required=("line_total", "line_items", "apply_discount", "discounts"),
            forbidden=("format_amount", "tax_for", "to_cents"),
        ),
        reference="round_money is called by line_total in invoicing/line_items.py and by apply_discount "
        "in invoicing/discounts.py.",
        decoys=(
            "line_total (line_items.py), apply_discount (discounts.py) and tax_for (taxes.py).",
            "line_total in line_items.py, apply_discount in discounts.py, format_amount in money.py.",
            "line_total in line_items.py",
        ),
    ),
    LearningTask(
        name="payment-terms-constant",
        kind="answer",
        prompts=(
            "What is the value of PAYMENT_TERMS_DAYS, and which modules of the invoicing package use it "
            "(apart from the one that defines it)?",
            "By default, how many days does a customer get to pay an invoice? Give me the number, the setting "
            "that holds it, and which parts of the invoicing package read that setting.",
        ),
        # Defined in config.py as 30; imported by due_dates.py and reports.py. numbering.py and customers.py
        # import other settings from config.py.
        check=answer_check(required=(("30", "thirty"), "due_dates", "reports"), forbidden=("numbering", "storage")),
        reference="PAYMENT_TERMS_DAYS is 30 (in invoicing/config.py). It is used by invoicing/due_dates.py "
        "(due_date_for) and invoicing/reports.py (aging_bucket).",
        decoys=(
            "PAYMENT_TERMS_DAYS = 30; config.py is imported by due_dates, reports, customers and numbering.",
            "It is 3, used by due_dates and reports.",
            "30 days, used in due_dates.py.",
        ),
    ),
    LearningTask(
        name="importers-of-money",
        kind="answer",
        prompts=(
            "List the modules in the invoicing package that import from invoicing.money.",
            "If I rename a function in invoicing/money.py, which other source files of the package (not the "
            "tests) might need updating because they import from it?",
        ),
        # line_items, discounts, invoice and reports import it; taxes.py only mentions money.round_money in a
        # comment.
        check=answer_check(
            required=("line_items", "discounts", "invoice", "reports"),
            forbidden=("numbering", "storage", "due_dates", "taxes"),
        ),
        reference="invoicing/line_items.py, invoicing/discounts.py, invoicing/invoice.py and invoicing/reports.py.",
        decoys=(
            "line_items, discounts, invoice, reports and taxes",
            "line_items.py, discounts.py and invoice.py",
            "config, errors, money, taxes, line_items, discounts, customers, numbering, due_dates, invoice, "
            "reports, storage",
        ),
    ),
    LearningTask(
        name="account-on-hold-error",
        kind="answer",
        prompts=(
            "Which function raises the error 'account on hold', in which file is it, and how many overdue "
            "invoices does it take to trigger it?",
            "We tried to bill a customer and got 'CreditError: account on hold'. Where in the code does that "
            "come from, and from what number of overdue invoices on does it happen?",
        ),
        # check_can_invoice in customers.py, when overdue_count >= MAX_OVERDUE_INVOICES (3, in config.py).
        # check_credit, in the same file, raises the other CreditError ("credit limit exceeded").
        check=answer_check(
            required=("check_can_invoice", module_file("customers"), ("3", "three")),
            forbidden=("check_credit",),
        ),
        reference="check_can_invoice in invoicing/customers.py raises it when the customer's overdue_count is "
        "at least MAX_OVERDUE_INVOICES, which is 3 (invoicing/config.py).",
        decoys=(
            "check_credit in customers.py raises it when the balance would exceed the credit limit.",
            "check_can_invoice in customers.py, from 5 overdue invoices.",
            "It is raised in customers.py by check_credit or check_can_invoice, at 3 overdue invoices.",
        ),
    ),
    LearningTask(
        name="diagnose-failing-test",
        kind="answer",
        setup=drop_in("tests/test_due_dates.py", DUE_DATES_TEST),
        prompts=(
            "Run `python -m pytest -q tests/test_due_dates.py`. One test fails. Tell me the name of the failing "
            "test and which function, in which module, has the bug. Do not fix anything.",
            "Something in tests/test_due_dates.py is red. Without changing any code, find out which test it is "
            "and track down the function that is to blame, and the file it lives in.",
        ),
        # is_overdue in due_dates.py uses >= where > is meant.
        check=answer_check(
            required=("test_not_overdue_on_the_due_date", "is_overdue", "due_dates"),
            forbidden=(
                "test_due_date_is_thirty_days_after_issue",
                "test_overdue_the_day_after_the_due_date",
                "days_late",
            ),
        ),
        reference="test_not_overdue_on_the_due_date fails: is_overdue in invoicing/due_dates.py returns "
        "today >= due, so an invoice counts as overdue on its due date; it should be today > due.",
        decoys=(
            "test_due_date_is_thirty_days_after_issue fails because of due_date_for in due_dates.py.",
            "test_not_overdue_on_the_due_date fails; the bug is in days_late in due_dates.py.",
            "test_due_date_is_thirty_days_after_issue, test_overdue_the_day_after_the_due_date and "
            "test_not_overdue_on_the_due_date; due_date_for, is_overdue, days_late in due_dates.py",
        ),
    ),
    LearningTask(
        name="count-todo-comments",
        kind="answer",
        prompts=(
            "How many TODO comments are there in the invoicing package in total, and which file has the most?",
            "Give me a quick overview of the open TODOs in invoicing/: what is the total count, and which module "
            "is the worst offender?",
        ),
        # storage.py 3, taxes.py 2, reports.py 1: 6 in all.
        check=answer_check(required=(("6", "six"), module_file("storage")), forbidden=("5", "7", "five", "seven")),
        reference="There are 6 TODO comments: 3 in invoicing/storage.py (the most), 2 in taxes.py and 1 in reports.py.",
        decoys=(
            "There are 5 TODO comments; storage.py has the most.",
            "6 TODOs in total; taxes.py has the most.",
            "Between 5 and 7 TODOs, most of them (6?) in storage.py.",
        ),
    ),
    LearningTask(
        name="exception-for-old-schema",
        kind="answer",
        prompts=(
            "What exception does invoicing.storage.load_invoice raise when a file has an unsupported schema "
            "version, and in which file is that exception class defined?",
            "Loading an invoice file written by an old version of the app blows up. Which exception class should "
            "I catch for that, and where is it declared?",
        ),
        # invoice_from_dict (called by load_invoice) raises StorageError, defined in errors.py with its siblings
        # UnknownRegionError and CreditError.
        check=answer_check(
            required=("StorageError", module_file("errors")),
            forbidden=("UnknownRegionError", "CreditError"),
        ),
        reference="It raises StorageError (from invoice_from_dict), which is defined in invoicing/errors.py.",
        decoys=(
            "StorageError",
            "InvoicingError, StorageError, UnknownRegionError and CreditError, all in errors.py.",
            "ValueError, a built-in exception defined in errors.py.",
        ),
    ),
    LearningTask(
        name="fix-bulk-discount",
        kind="change",
        setup=drop_in("tests/test_bulk_discount.py", BULK_DISCOUNT_TEST),
        prompts=(
            "The tests in tests/test_bulk_discount.py fail. Fix the bug in the invoicing package so that they "
            "pass, without changing the tests.",
            "A customer who ordered 150 units got only a 2% bulk discount instead of 10%. Find the cause in "
            "invoicing/ and fix it; tests/test_bulk_discount.py should pass afterwards.",
        ),
        check=change_check("tests/test_bulk_discount.py", BULK_DISCOUNT_TEST),
        reference=replace_in("invoicing/discounts.py", "in BULK_TIERS:", "in reversed(BULK_TIERS):"),
    ),
    LearningTask(
        name="add-parse-invoice-number",
        kind="change",
        setup=drop_in("tests/test_parse_invoice_number.py", PARSE_NUMBER_TEST),
        prompts=(
            "tests/test_parse_invoice_number.py expects a function parse_invoice_number in invoicing/numbering.py "
            "that does not exist yet. Add it so that the tests pass.",
            "Write the inverse of format_invoice_number: parse_invoice_number should turn 'INV-00042' back into "
            "42 and raise ValueError for anything that is not an invoice number. Put it next to "
            "format_invoice_number; tests/test_parse_invoice_number.py has to pass.",
        ),
        check=change_check("tests/test_parse_invoice_number.py", PARSE_NUMBER_TEST),
        reference=_append_parse_invoice_number,
    ),
    LearningTask(
        name="add-tax-region-nl",
        kind="change",
        setup=drop_in("tests/test_tax_nl.py", TAX_NL_TEST),
        prompts=(
            "Add the Netherlands, region code NL, with a tax rate of 21% to the invoicing package. "
            "tests/test_tax_nl.py checks it; make it pass.",
            "We're starting to sell to Dutch customers. Their VAT is 21 percent and their region code is 'NL'. "
            "Make the invoicing code support them; the tests in tests/test_tax_nl.py must pass.",
        ),
        check=change_check("tests/test_tax_nl.py", TAX_NL_TEST),
        reference=replace_in(
            "invoicing/taxes.py",
            '    "FR": Decimal("0.20"),\n',
            '    "FR": Decimal("0.20"),\n    "NL": Decimal("0.21"),\n',
        ),
    ),
]

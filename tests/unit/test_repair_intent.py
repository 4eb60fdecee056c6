"""What the request says binds the fix beyond the tests: the files it names, the names renamed or removed on
purpose, "don't change the tests" (scripted model, real pytest runs)."""

from __future__ import annotations

from pathlib import Path

from cortana.repair import FixRequest, FixStatus
from cortana.repair.intent import objection
from cortana.repair.patches import Block, Patch
from cortana.testing import ScriptedModel
from tests.unit.test_repair import block, workflow, write

RENAMED = {
    "conftest.py": "",
    "shop/__init__.py": "",
    "shop/prices.py": '''
        def render_price(cents):
            """Cents as euros, for people: 1234 -> "12.34 EUR"."""
            return f"{cents // 100}.{cents % 100:02d} EUR"
        ''',
    "shop/report.py": """
        from shop.prices import format_price


        def line(name, cents):
            return f"{name}: {format_price(cents)}"
        """,
    "tests/test_report.py": """
        from shop.report import line


        def test_line():
            assert line("tea", 250) == "tea: 2.50 EUR"
        """,
}
"""The user renamed ``format_price`` to ``render_price`` on purpose; ``report.py`` still imports the old name."""
BRING_BACK = block(
    "shop/prices.py",
    '    return f"{cents // 100}.{cents % 100:02d} EUR"',
    '    return f"{cents // 100}.{cents % 100:02d} EUR"\n\n\nformat_price = render_price',
)
"""What a small model wrote: the old name back where it was renamed. The tests pass; the rename is undone."""
CALLER = block(
    "shop/report.py", "from shop.prices import format_price", "from shop.prices import render_price"
) + block(
    "shop/report.py", '    return f"{name}: {format_price(cents)}"', '    return f"{name}: {render_price(cents)}"'
)


def test_the_request_is_read_for_what_it_binds() -> None:
    fix = FixRequest.parse("I renamed format_price to render_price on purpose; update the callers in shop/report.py")
    assert fix.renamed == (("format_price", "render_price"),) and fix.gone == ("format_price",)
    assert fix.rename is None, "done already: its uses are what is left"
    assert fix.places == ("shop/report.py",) and not fix.only_places
    symptom = FixRequest.parse("apply_discount in shop/prices.py makes prices go up. Can you fix it?")
    assert symptom.places == (), "a file named where the symptom shows is not where the change must go"
    only = FixRequest.parse("parse_date was removed, don't bring it back. Update app/main.py only.")
    assert only.gone == ("parse_date",) and only.places == ("app/main.py",) and only.only_places
    keep = FixRequest.parse("Fix the rounding, but do not change the tests")
    assert keep.keep_tests and not keep.tests_may_change
    assert not FixRequest.parse("fix the failing tests").tests_may_change, "the failing tests are the evidence"
    assert FixRequest.parse("update the tests for the new format").tests_may_change
    assert FixRequest.parse("Leave the tests alone and fix slugify").keep_tests
    assert fix.read() == [
        "the change goes in shop/report.py",
        "format_price was renamed to render_price on purpose: its uses follow, format_price is not written back",
    ]


def test_a_patch_against_the_request_is_named_with_why() -> None:
    originals = {"shop/prices.py": "def render_price(c):\n    return c\n", "tests/test_x.py": "x = 1\n"}
    back = {"shop/prices.py": originals["shop/prices.py"] + "\nformat_price = render_price\n"}
    renamed = FixRequest.parse("format_price was renamed to render_price; fix the failing tests")
    why = objection(renamed, Patch((Block("shop/prices.py", "", ""),), back), originals)
    assert why == (
        "it defines format_price again in shop/prices.py, and the request says format_price was renamed to "
        "render_price on purpose"
    )
    keep = FixRequest.parse("make the test pass; don't touch the tests")
    tests = {"tests/test_x.py": "x = 2\n"}
    assert "leave the tests as they are" in str(objection(keep, Patch((), tests), originals))
    placed = FixRequest.parse("update shop/report.py to use render_price")
    assert "not shop/report.py" in str(objection(placed, Patch((), back), originals))
    assert objection(FixRequest.parse("fix it"), Patch((), back), originals) is None


async def test_the_uses_of_a_name_renamed_on_purpose_follow_it_without_a_model(tmp_path: Path) -> None:
    project = write(tmp_path / "p", RENAMED)
    model = ScriptedModel([BRING_BACK])  # never asked
    request = "I renamed format_price to render_price on purpose; update the callers in shop/report.py"
    result = await workflow(project, model).run(request)
    assert result.status is FixStatus.FIXED, result.message
    assert set(result.patch.files) == {"shop/report.py"}  # type: ignore[union-attr]
    assert "render_price(cents)" in result.diff and "format_price" not in result.patch.files["shop/report.py"]  # type: ignore[union-attr]
    assert result.model_calls == 0


async def test_a_passing_patch_that_brings_back_a_removed_name_is_set_aside(tmp_path: Path) -> None:
    project = write(tmp_path / "p", RENAMED)
    model = ScriptedModel([BRING_BACK, CALLER])
    progress: list[str] = []
    found = workflow(project, model, samples=1, per_location=0, rounds=1, rewrite=False)
    found.on_progress = lambda step: progress.append(step.message)
    result = await found.run("format_price was removed on purpose. Update shop/report.py to use render_price")
    assert result.status is FixStatus.FIXED, result.message
    assert set(result.patch.files) == {"shop/report.py"}, "the patch the request asked for, not the first to pass"  # type: ignore[union-attr]
    assert any("set aside" in line and "defines format_price again" in line for line in progress), progress


async def test_when_only_a_patch_against_the_request_passes_it_is_shown_aside_not_applied(tmp_path: Path) -> None:
    project = write(tmp_path / "p", RENAMED)
    model = ScriptedModel([BRING_BACK, BRING_BACK])
    result = await workflow(project, model, samples=1, per_location=0, rounds=1, rewrite=False).run(
        "format_price was removed on purpose. Update shop/report.py to use render_price"
    )
    assert result.status is FixStatus.FAILED and result.patch is None
    assert "set aside: it defines format_price again" in result.message
    assert "format_price = render_price" in result.set_aside and result.set_aside_why.startswith("it defines")
    assert result.closest == "", "it fixed the test, but it is not offered as the closest attempt either"


async def test_the_plan_says_what_it_read_from_the_request(tmp_path: Path) -> None:
    project = write(tmp_path / "p", RENAMED)
    result = await workflow(project, ScriptedModel([])).run(
        "format_price was removed on purpose. Update shop/report.py to use render_price", plan_only=True
    )
    assert result.status is FixStatus.PLANNED
    assert "From the request: the change goes in shop/report.py; format_price was removed on purpose" in result.message


async def test_a_request_the_router_sends_to_the_workflow_is_a_change_there_too(tmp_path: Path) -> None:
    """One rule says whether words ask for a change: a request routed to the workflow because it says what the code
    should do is not answered "the tests pass, nothing to fix" there."""
    from cortana.repair.routing import is_change_request

    asked = "total should return 0 for an empty cart"
    assert is_change_request(asked) and FixRequest.parse(asked).wants_change
    project = write(tmp_path / "p", {
        "conftest.py": "",
        "cart.py": "def total(items):\n    return sum(items)\n",
        "tests/test_cart.py": "from cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
    })  # fmt: skip
    result = await workflow(project, ScriptedModel(["nothing"] * 40), rounds=1, samples=1).run(asked)
    assert result.status is not FixStatus.PASSING, result.message

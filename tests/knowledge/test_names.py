"""Which words of a prompt count as names of code (and so cost a graph lookup)."""

from __future__ import annotations

import pytest

from cortana.knowledge.names import MAX_NAMES, names_in


@pytest.mark.parametrize(
    "prompt",
    [
        "hi",
        "",
        "Can you run the tests and register me for the lookup service?",  # English words that are also functions
        "e.g. this, i.e. that, etc.",
        "`git status` shows nothing",  # a backticked command is not a name
        "Thanks! That was great.",
    ],
)
def test_plain_prompts_name_nothing(prompt: str) -> None:
    assert not names_in(prompt)


@pytest.mark.parametrize(
    ("prompt", "strong"),
    [
        ("What depends on SkillRegistry?", ("SkillRegistry",)),
        ("Explain `Agent.run_stream` in runtime.py", ("Agent.run_stream", "runtime.py")),
        ("what calls load_defaults.", ("load_defaults",)),
        ("Call run() then build_app()", ("run", "build_app")),
        ("what does `lookup` do", ("lookup",)),
        ("see src/app.ts and web/format.js:12", ("src/app.ts", "web/format.js")),
        ("use os.path.join here", ("os.path.join",)),
        ("open `shop/app.py::run`", ("shop/app.py::run",)),
        ("formatName, HTTPServer, __init__ and MAX_SIZE", ("formatName", "HTTPServer", "__init__", "MAX_SIZE")),
        ("Why is `build_app()` slow?", ("build_app",)),
        ("Where is _classify used?", ("_classify",)),
    ],
)
def test_names_by_shape(prompt: str, strong: tuple[str, ...]) -> None:
    assert names_in(prompt).strong == strong


def test_a_capitalised_word_inside_a_sentence_is_a_weak_name_but_not_the_first_word() -> None:
    assert names_in("What depends on Catalog?").weak == ("Catalog",)
    assert names_in("Catalog is big. Tell me more").weak == ()
    assert names_in("Hello Bob").weak == ("Bob",)


def test_names_are_deduplicated_kept_in_order_and_capped() -> None:
    prompt = " ".join(f"name_{i}" for i in range(20)) + " name_1"
    found = names_in(prompt).strong
    assert found == tuple(f"name_{i}" for i in range(MAX_NAMES))


def test_a_huge_prompt_is_scanned_only_at_its_head() -> None:
    assert names_in("word " * 20_000 + "load_defaults").strong == ()

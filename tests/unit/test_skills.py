"""Skills: SKILL.md parsing and rendering, discovery in folders, the prompt block and the load_skill tool."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from cortana.errors import ToolError
from cortana.learning.skills import (
    LOAD_SKILL,
    MAX_DESCRIPTION_CHARS,
    MAX_LOADED_CHARS,
    MAX_SKILL_BYTES,
    MAX_SKILLS,
    Skill,
    SkillError,
    SkillProblem,
    SkillRegistry,
    clean_description,
    parse_skill,
    render_skill,
)
from cortana.tools import Tool

RELEASE = """---
name: release
description: Cut a release - bump the version, tag it, build the wheel.
---
1. Run `bump-my-version bump patch`.
2. Tag it.
"""


def skill_text(name: str, description: str = "Does a thing.", body: str = "1. Do it.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


def write_skill(folder: Path, directory: str, text: str | bytes) -> Path:
    path = folder / directory / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


async def call(tool: Tool, **arguments: object) -> object:
    """Run a tool as the agent loop does: validate the model's arguments, then invoke."""
    return await tool.invoke(tool.validate(dict(arguments)))


# --- parse_skill / render_skill -------------------------------------------------------------------


def test_parse_reads_front_matter_and_body() -> None:
    skill = parse_skill(RELEASE, Path("/x/release/SKILL.md"))
    assert skill == Skill(
        name="release",
        description="Cut a release - bump the version, tag it, build the wheel.",
        body="1. Run `bump-my-version bump patch`.\n2. Tag it.",
        path=Path("/x/release/SKILL.md"),
    )


def test_parse_ignores_extra_keys_and_accepts_crlf_and_bom() -> None:
    text = "\ufeff---\r\nname: notes\r\ndescription: Write notes.\r\nversion: 3\r\ntags: [a, b]\r\n---\r\nStep one.\r\n"
    skill = parse_skill(text)
    assert (skill.name, skill.description, skill.body, skill.path) == ("notes", "Write notes.", "Step one.", None)


def test_only_the_first_closing_fence_ends_the_front_matter() -> None:
    skill = parse_skill(skill_text("rules", body="Intro.\n---\nname: not-front-matter\n---\nMore."))
    assert skill.name == "rules"
    assert skill.body == "Intro.\n---\nname: not-front-matter\n---\nMore."


def test_render_then_parse_round_trips() -> None:
    original = parse_skill(RELEASE, Path("/x/SKILL.md"))
    text = render_skill(original)
    assert text.startswith("---\nname: release\n")
    assert parse_skill(text, original.path) == original


@pytest.mark.parametrize(
    "description",
    [
        "yes",  # YAML would read a bare yes as a boolean
        "1.5",
        "key: value # not a comment",
        "'quoted' and \"double\" – café ☕",
        "- looks like a list",
        "x" * MAX_DESCRIPTION_CHARS,
    ],
)
def test_render_round_trips_descriptions_yaml_would_misread(description: str) -> None:
    skill = Skill(name="tricky.name_1-a", description=description, body="  Step.\n\n  Step two.  ")
    assert skill.body == "Step.\n\n  Step two."
    back = parse_skill(render_skill(skill))
    assert back == skill
    assert back.description == description


def test_render_refuses_a_skill_too_large_to_read_back() -> None:
    skill = Skill(name="big", description="Big.", body="x" * MAX_SKILL_BYTES)
    with pytest.raises(SkillError, match="larger than 64 KiB"):
        render_skill(skill)


def test_description_newlines_collapse_and_control_characters_go() -> None:
    text = skill_text("multi", description=r'"First line\n  second\tline\e[31m red\u202e\u200b\U000E0041!\n"')
    assert parse_skill(text).description == "First line second line[31m red!"
    folded = skill_text("folded", description="|\n  One\n  two\n\n  three")
    assert parse_skill(folded).description == "One two three"


def test_long_description_is_cut_with_an_ellipsis() -> None:
    skill = parse_skill(skill_text("long", description="word " * 100))
    assert len(skill.description) == MAX_DESCRIPTION_CHARS
    assert skill.description.endswith("…")
    assert "\n" not in skill.description
    assert skill.description.startswith("word word")


def test_clean_description_keeps_a_short_line_as_it_is() -> None:
    assert clean_description("Cut a release.") == "Cut a release."
    assert clean_description("  a\n\n b \r\n c  ") == "a b c"
    assert clean_description("x" * (MAX_DESCRIPTION_CHARS + 1)) == "x" * (MAX_DESCRIPTION_CHARS - 1) + "…"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("name: x\ndescription: y\n\nSteps.\n", "no front matter"),
        ("Steps first.\n---\nname: x\ndescription: y\n---\n", "no front matter"),
        ("---\nname: x\ndescription: y\nSteps.\n", "not closed"),
        ("---\nname: x: y\ndescription: z\n---\nSteps.\n", "not valid YAML at line 2, column 8"),
        ("---\nname: x\ndescription: [y\n---\nSteps.\n", "not valid YAML"),
        ("---\nname: x\ndescription: y\nextra: " + "[" * 20_000 + "\n---\nSteps.\n", "nested too deeply"),
        ("---\n- name\n- description\n---\nSteps.\n", "must be a mapping"),
        ("---\njust words\n---\nSteps.\n", "must be a mapping"),
        ("---\n---\nSteps.\n", "no 'name:'"),
        ("---\nname: x\n---\nSteps.\n", "no 'description:'"),
        ("---\nname: x\ndescription:\n---\nSteps.\n", "no 'description:'"),
        ("---\nname: 2024\ndescription: y\n---\nSteps.\n", "'name' must be text, not int"),
        ("---\nname: x\ndescription: [a, b]\n---\nSteps.\n", "'description' must be text, not list"),
        ('---\nname: x\ndescription: "\\a \\n"\n---\nSteps.\n', "description is empty"),
        ("---\nname: my skill\ndescription: y\n---\nSteps.\n", "not allowed: use 1-64 letters"),
        ("---\nname: -dash\ndescription: y\n---\nSteps.\n", "not allowed"),
        ("---\nname: ../escape\ndescription: y\n---\nSteps.\n", "not allowed"),
        (f"---\nname: {'a' * 65}\ndescription: y\n---\nSteps.\n", "not allowed"),
        ("---\nname: x\ndescription: y\n---\n\n  \n", "no instructions"),
        ("---\nname: x\ndescription: y\n---", "no instructions"),
        (skill_text("x", body="é" * MAX_SKILL_BYTES), "larger than 64 KiB"),
    ],
)
def test_parse_names_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(SkillError, match=reason):
        parse_skill(text)


def test_a_64_character_name_is_allowed() -> None:
    assert parse_skill(skill_text("a" * 64)).name == "a" * 64


def test_constructing_a_skill_checks_it() -> None:
    with pytest.raises(SkillError, match="not allowed"):
        Skill(name="bad name", description="d", body="b")
    with pytest.raises(SkillError, match="no instructions"):
        Skill(name="ok", description="d", body="  \n")


# --- discovery ------------------------------------------------------------------------------------


def test_discovery_in_two_folders_sorts_and_the_first_folder_wins(tmp_path: Path) -> None:
    workspace, user = tmp_path / "workspace" / "skills", tmp_path / "config" / "skills"
    write_skill(workspace, "zeta", skill_text("zeta", "Last by name."))
    first = write_skill(workspace, "rel", skill_text("release", "The workspace's release."))
    write_skill(user, "alpha", skill_text("alpha", "From the user."))
    second = write_skill(user, "release", skill_text("release", "The user's release."))
    later_loose = write_skill(user, "release2", skill_text("Release", "Same name, other case."))

    registry = SkillRegistry([workspace, user])

    assert [skill.name for skill in registry] == ["alpha", "release", "zeta"]
    assert len(registry) == 3
    release = registry.get("release")
    assert release is not None and release.description == "The workspace's release."
    assert release.path == first
    assert registry.problems == [
        SkillProblem(second, f"the skill release at {first} has this name and comes first"),
        SkillProblem(later_loose, f"the skill release at {first} has this name and comes first"),
    ]


def test_get_matches_exactly_then_loosely(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "a", skill_text("release_notes"))
    write_skill(folder, "b", skill_text("Deploy"))
    registry = SkillRegistry([folder])
    assert registry.get("release_notes") is registry.skills[1]
    assert registry.get("Release-Notes") is registry.skills[1]
    assert registry.get("deploy") is registry.skills[0]
    assert registry.get("releasenotes") is None
    assert registry.get("") is None


def test_only_skill_md_one_folder_down_counts(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    (folder / "SKILL.md").parent.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_text("top-level"), encoding="utf-8")
    write_skill(folder / "group", "deep", skill_text("too-deep"))
    write_skill(folder, ".hidden", skill_text("hidden"))
    write_skill(folder, "real", skill_text("real"))
    (folder / "no-skill").mkdir()
    (folder / "no-skill" / "README.md").write_text("nothing", encoding="utf-8")
    (folder / "notes.md").write_text("nothing", encoding="utf-8")

    registry = SkillRegistry([folder])

    assert [skill.name for skill in registry] == ["real"]
    assert registry.problems == []


def test_missing_folders_are_fine(tmp_path: Path) -> None:
    registry = SkillRegistry([tmp_path / "nope", tmp_path / "also-not-here"])
    assert len(registry) == 0
    assert registry.problems == []
    assert registry.instructions() == ""
    assert registry.tools() == []


def test_the_same_folder_twice_is_scanned_once(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "one", skill_text("one"))
    registry = SkillRegistry([folder, tmp_path / "." / "skills"])
    assert [skill.name for skill in registry] == ["one"]
    assert registry.problems == []


def _malformed(folder: Path, outside: Path) -> dict[str, tuple[Path, str]]:
    """Write one bad SKILL.md of each kind; the path each is reported at and a part of its reason."""
    cases: dict[str, tuple[Path, str]] = {}

    def bad(directory: str, text: str | bytes, reason: str) -> None:
        cases[directory] = (write_skill(folder, directory, text), reason)

    bad("no-front", "name: x\ndescription: y\nSteps.\n", "there is no front matter")
    bad("unclosed", "---\nname: unclosed\ndescription: y\nSteps.\n", "the front matter is not closed")
    bad("not-mapping", "---\n- a\n- b\n---\nSteps.\n", "must be a mapping of keys to values")
    bad("no-description", "---\nname: no-description\n---\nSteps.\n", "the front matter has no 'description:'")
    bad("bad-name", "---\nname: bad name!\ndescription: y\n---\nSteps.\n", "is not allowed: use 1-64 letters")
    bad("empty-body", "---\nname: empty-body\ndescription: y\n---\n\n", "there are no instructions")
    bad("too-large", skill_text("too-large", body="x" * MAX_SKILL_BYTES), "larger than 64 KiB")
    bad("not-utf8", b"---\nname: latin\ndescription: caf\xe9\n---\nSteps.\n", "not UTF-8 text")

    write_skill(outside, "evil", skill_text("evil", "Outside the folder."))
    linked_file = folder / "linked-file" / "SKILL.md"
    linked_file.parent.mkdir(parents=True)
    linked_file.symlink_to(outside / "evil" / "SKILL.md")
    cases["linked-file"] = (linked_file, f"a link out of {folder}")
    (folder / "linked-folder").symlink_to(outside / "evil", target_is_directory=True)
    cases["linked-folder"] = (folder / "linked-folder" / "SKILL.md", f"a link out of {folder}")
    return cases


def test_each_malformed_skill_is_reported_once_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "good", skill_text("good", "A good one."))
    write_skill(folder, "zz-good", skill_text("zz-good", "Another good one."))
    cases = _malformed(folder, tmp_path / "elsewhere")

    with caplog.at_level(logging.WARNING, logger="cortana.skills"):
        registry = SkillRegistry([folder])

    assert [skill.name for skill in registry] == ["good", "zz-good"]
    reported = {problem.path: problem.reason for problem in registry.problems}
    assert len(registry.problems) == len(cases) == len(reported)
    for directory, (path, reason) in cases.items():
        assert path in reported, f"{directory} was not reported"
        assert reason in reported[path], f"{directory}: {reported[path]!r} does not say {reason!r}"
    logged = [record.getMessage() for record in caplog.records if record.name == "cortana.skills"]
    assert len(logged) == len(cases)
    for path, reason in reported.items():
        assert sum(str(path) in line and reason in line for line in logged) == 1


def test_a_link_inside_the_folder_is_followed(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "original", skill_text("original"))
    (folder / "alias").symlink_to(folder / "original", target_is_directory=True)
    (folder / "shared").mkdir()
    (folder / "shared" / "SKILL.md").symlink_to(Path("..") / "original" / "SKILL.md")
    write_skill(folder, "copy", skill_text("original", "A copy, not a link."))
    registry = SkillRegistry([folder])
    assert [(skill.name, skill.path) for skill in registry] == [("original", folder / "alias" / "SKILL.md")]
    assert registry.problems == [  # the links read the one file once; only the real copy is a duplicate
        SkillProblem(
            folder / "copy" / "SKILL.md",
            f"the skill original at {folder / 'alias' / 'SKILL.md'} has this name and comes first",
        )
    ]


def test_a_symlink_loop_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "good", skill_text("good"))
    (folder / "loop").mkdir()
    (folder / "loop" / "SKILL.md").symlink_to("SKILL.md")
    registry = SkillRegistry([folder])
    assert [skill.name for skill in registry] == ["good"]
    assert [(p.path, p.reason) for p in registry.problems] == [
        (folder / "loop" / "SKILL.md", "a link that loops back on itself: replace it with the file")
    ]


def test_a_linked_skills_folder_is_scanned_where_it_leads(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "skills"
    write_skill(real, "mine", skill_text("mine"))
    link = tmp_path / "config-skills"
    link.symlink_to(real, target_is_directory=True)
    registry = SkillRegistry([link])
    assert [skill.name for skill in registry] == ["mine"]
    assert registry.problems == []


def test_a_fifo_named_skill_md_is_a_problem_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    (folder / "pipe").mkdir(parents=True)
    os.mkfifo(folder / "pipe" / "SKILL.md")
    registry = SkillRegistry([folder])
    assert len(registry) == 0
    assert [(p.path, p.reason) for p in registry.problems] == [
        (folder / "pipe" / "SKILL.md", "not a regular file: a skill's SKILL.md must be a plain text file")
    ]


def test_at_most_max_skills_load(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    for number in range(MAX_SKILLS + 2):
        write_skill(folder, f"s{number:03}", skill_text(f"s{number:03}"))
    registry = SkillRegistry([folder, tmp_path / "more"])
    assert len(registry) == MAX_SKILLS
    assert registry.skills[-1].name == f"s{MAX_SKILLS - 1:03}"
    assert len(registry.problems) == 1
    assert registry.problems[0].path == folder / f"s{MAX_SKILLS:03}" / "SKILL.md"
    assert f"at most {MAX_SKILLS} skills" in registry.problems[0].reason


# --- the prompt block and the tool ----------------------------------------------------------------


def test_instructions_list_names_and_descriptions_and_are_stable(tmp_path: Path) -> None:
    workspace, user = tmp_path / "a", tmp_path / "b"
    write_skill(workspace, "2", skill_text("release", "Cut a release."))
    write_skill(user, "1", skill_text("deploy", "Deploy it.\n  Twice."))

    first = SkillRegistry([workspace, user]).instructions()
    second = SkillRegistry([workspace, user]).instructions()

    assert first == (
        "Skills (step-by-step instructions for tasks; call load_skill with the name before doing one of these):\n"
        "- deploy: Deploy it. Twice.\n"
        "- release: Cut a release."
    )
    assert first.encode() == second.encode()


def test_no_skills_no_instructions_and_no_tools(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "broken", "no front matter\n")
    registry = SkillRegistry([folder])
    assert registry.instructions() == ""
    assert registry.tools() == []
    assert len(registry.problems) == 1


async def test_load_skill_returns_the_body(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    path = write_skill(folder, "release", RELEASE)
    write_skill(folder, "other", skill_text("other"))
    [tool] = SkillRegistry([folder]).tools()

    assert tool.name == LOAD_SKILL
    assert tool.read_only
    assert set(tool.parameters["properties"]) == {"name"}
    assert tool.parameters["required"] == ["name"]
    assert "Skills" in tool.description
    result = await call(tool, name="release")
    assert result == f"Skill release (from {path}):\n1. Run `bump-my-version bump patch`.\n2. Tag it."
    assert await call(tool, name="RELEASE") == result


async def test_load_skill_with_an_unknown_name_lists_the_names(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "b", skill_text("release"))
    write_skill(folder, "a", skill_text("deploy"))
    [tool] = SkillRegistry([folder]).tools()

    with pytest.raises(ToolError, match=r"No skill named 'publish'\. Skills: deploy, release\.") as caught:
        await call(tool, name="publish")
    assert caught.value.tool_name == LOAD_SKILL


async def test_load_skill_bounds_a_long_body(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    body = "step\n" * 5_000  # 25,000 characters: under 64 KiB, over what the tool shows
    write_skill(folder, "long", skill_text("long", body=body))
    [tool] = SkillRegistry([folder]).tools()

    result = await call(tool, name="long")

    assert isinstance(result, str)
    header, _, shown = result.partition("\n")
    assert header.startswith("Skill long (from ")
    assert shown.startswith(body.strip()[:MAX_LOADED_CHARS])
    assert f"cut at {MAX_LOADED_CHARS:,} of {len(body.strip()):,} characters" in shown
    assert len(shown) < MAX_LOADED_CHARS + 200


def test_render_of_a_skill_made_in_code() -> None:
    skill = Skill(name="inline", description="Made in code.", body="Do it.")
    assert skill.path is None
    assert render_skill(skill) == "---\nname: inline\ndescription: Made in code.\n---\nDo it.\n"

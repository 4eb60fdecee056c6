"""The interactive session's learning commands: ``/good``, ``/bad``, ``/learned``, ``/teach`` and ``/skills``.

- ``/good`` and ``/bad`` rate the last answer of the thread (and so the recipes it
  used and the recipe distilled from it).
- ``/learned`` lists the recipes (task, rating, uses, age) and, from stored runs,
  whether the runs that used a recipe took fewer tool calls than the runs of the
  same task before it existed; ``/learned forget N`` deletes one.
- ``/teach [name]`` records what the user does (``!`` commands with exit codes and
  output heads, lines typed as notes, file changes); ``/teach done`` has the model
  draft a SKILL.md and asks to keep, edit or drop it; ``/teach cancel`` discards.
  Nothing is written without the user's yes.
- ``/skills`` lists the skills the assistant can load, and the files that were skipped.
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from cortana.config import editor_command
from cortana.display import printable
from cortana.errors import CortanaError, UserError
from cortana.messages import ThreadRef

if TYPE_CHECKING:  # imported where used: the session's prompt shows before the agent and teach mode load
    from cortana.agent.agent import Agent
    from cortana.learning.experience import Experience, RecipeInfo
    from cortana.learning.skills import SkillRegistry
    from cortana.learning.teach import TeachSession
    from cortana.memory.checkpoints import Checkpoints

__all__ = ["LEARNING_COMMANDS", "LearningCommands"]

LEARNING_COMMANDS = {
    "/good": "rate the last answer good (its recipes are trusted after two)",
    "/bad": "rate the last answer bad (recipes rated bad twice are no longer shown)",
    "/learned": "list the recipes learned from earlier runs; /learned forget N deletes one",
    "/teach": "record what you do (! commands, notes, file changes) and draft a skill: /teach NAME, done, cancel",
    "/skills": "list the skills the assistant can load",
}

Ask = Callable[[str], Awaitable[str]]


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{max(int(seconds // 60), 0)} min"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86_400)} d"


def _mean(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:.1f}{unit}"


class LearningCommands:
    """The learning commands of one interactive session, and teach mode's recording.

    Args:
        agent: the session's agent, once the engine is up (its engine drafts skills).
        experience: the workspace's experience, or ``None`` when learning is off.
        skills: the skills found at start, or ``None`` when they are off.
        workspace: the folder teach mode watches and saves skills in.
        console: for notes (stderr); ``out``: for what the user asked to see (stdout).
        thread: the session's current thread.
        ask: asks the user one question and returns the answer (the prompt session's input).
    """

    def __init__(
        self,
        agent: Callable[[], Agent],
        experience: Experience | None,
        skills: SkillRegistry | None,
        workspace: Path,
        console: Console,
        out: Console,
        thread: Callable[[], ThreadRef],
        ask: Ask,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self.checkpoints = checkpoints
        """Where the SKILL.md teach mode writes is recorded first, as a turn of its own (``/undo`` removes it)."""
        self.agent = agent
        self.experience = experience
        self.skills = skills
        self.workspace = workspace
        self.console = console
        self.out = out
        self.thread = thread
        self.ask = ask
        self.teaching: TeachSession | None = None

    def handlers(self) -> dict[str, Callable[[str], Awaitable[bool]]]:
        """Slash command -> handler (each returns True: the session goes on)."""
        return {
            "/good": self.good,
            "/bad": self.bad,
            "/learned": self.learned,
            "/teach": self.teach,
            "/skills": self.list_skills,
        }

    # -- ratings ----------------------------------------------------------------------------------

    async def good(self, _: str) -> bool:
        """``/good``."""
        return await self._rate("good")

    async def bad(self, _: str) -> bool:
        """``/bad``."""
        return await self._rate("bad")

    async def _rate(self, rating: str) -> bool:
        if self.experience is None:
            self.out.print("Learning is off (learning.enabled: false in cortana.yml).", highlight=False)
            return True
        run_id = await self.experience.rate(
            "good" if rating == "good" else "bad", thread=self.thread(), source="command"
        )
        if run_id is None:
            self.out.print("There is no answer in this conversation to rate yet.", highlight=False)
            return True
        recipes = await self.experience.rated_recipes(run_id)
        reach = f" (recipes {', '.join(map(str, recipes))})" if recipes else ""
        self.out.print(Text(f"Rated the last answer {rating}{reach}."), highlight=False)
        return True

    # -- /learned ---------------------------------------------------------------------------------

    async def learned(self, argument: str) -> bool:
        """``/learned`` and ``/learned forget N``."""
        if self.experience is None:
            self.out.print("Learning is off (learning.enabled: false in cortana.yml).", highlight=False)
            return True
        words = argument.split()
        if words and words[0] == "forget":
            if len(words) != 2 or not words[1].isdigit():
                self.console.print("Usage: /learned forget N, with a recipe number from /learned.")
            elif await self.experience.forget(int(words[1])):
                self.out.print(f"Forgot recipe {words[1]}.", highlight=False)
            else:
                self.out.print(f"There is no recipe {words[1]}.", highlight=False)
            return True
        if words:
            self.console.print("Usage: /learned, or /learned forget N.")
            return True
        infos = await self.experience.recipes()
        if not infos:
            self.out.print(
                "Nothing learned yet: a recipe is distilled after an answer that took "
                f"{self.experience.min_tool_calls} or more tool calls.",
                highlight=False,
            )
            return True
        now = self.experience.clock()
        for info in infos:
            await self._show_recipe(self.experience, info, now)
        return True

    async def _show_recipe(self, experience: Experience, info: RecipeInfo, now: float) -> None:
        state = " · hidden (rated bad twice)" if info.hidden else " · trusted" if info.trusted else ""
        task = info.recipe.task if len(info.recipe.task) <= 90 else info.recipe.task[:89] + "…"
        self.out.print(
            Text(
                printable(
                    f"{info.id:>3}. {task}\n     +{info.good}/-{info.bad} · used {info.uses}× · "
                    f"{_age(now - info.created_at)} old{state}"
                )
            ),
            highlight=False,
        )
        impact = await experience.impact(info.id)
        if not impact.runs_with:
            return
        self.out.print(
            Text(
                f"     tool calls {_mean(impact.tool_calls_before)} before ({impact.runs_before} runs) → "
                f"{_mean(impact.tool_calls_with)} with it ({impact.runs_with} runs); "
                f"time {_mean(impact.seconds_before, ' s')} → {_mean(impact.seconds_with, ' s')}"
            ),
            highlight=False,
        )

    # -- /skills ----------------------------------------------------------------------------------

    async def list_skills(self, _: str) -> bool:
        """``/skills``."""
        if self.skills is None:
            self.out.print("Skills are off (learning.skills: false in cortana.yml).", highlight=False)
            return True
        if not len(self.skills):
            self.out.print(
                "No skills yet: put one in skills/NAME/SKILL.md, or record one with /teach.", highlight=False
            )
        for skill in self.skills:
            self.out.print(Text(printable(f"  {skill.name}: {skill.description}  ({skill.path})")), highlight=False)
        for problem in self.skills.problems:
            self.out.print(Text(printable(f"  skipped {problem.path}: {problem.reason}"), style="yellow"))
        return True

    # -- teach mode -------------------------------------------------------------------------------

    async def teach(self, argument: str) -> bool:
        """``/teach [name]``, ``/teach done``, ``/teach cancel``."""
        if argument == "cancel":
            if self.teaching is None:
                self.out.print("Not teaching; /teach NAME starts.", highlight=False)
            else:
                self.teaching = None
                self.out.print("Teach mode cancelled; nothing was kept.", highlight=False)
            return True
        if argument == "done":
            if self.teaching is None:
                self.out.print("Not teaching; /teach NAME starts.", highlight=False)
                return True
            session, self.teaching = self.teaching, None
            await self._draft(session)
            return True
        if self.teaching is not None:
            self.out.print("Already teaching: /teach done drafts the skill, /teach cancel discards.", highlight=False)
            return True
        from cortana.learning.teach import TeachSession

        try:
            self.teaching = await asyncio.to_thread(TeachSession, self.workspace, argument or None)
        except UserError as exc:
            self.console.print(Text(printable(str(exc)), style="red"))
            return True
        self.out.print(
            Text(
                printable(
                    f"Teaching{' ' + repr(self.teaching.name) if self.teaching.name else ''}: do the task yourself. "
                    "!commands are recorded with their output, other lines are notes, and file changes are "
                    "diffed. /teach done drafts a SKILL.md; /teach cancel discards."
                )
            ),
            highlight=False,
        )
        return True

    def record_shell(self, command: str, exit_code: int, output: str) -> None:
        """A ``!`` command ran: recorded while teaching."""
        if self.teaching is not None:
            self.teaching.record_command(command, exit_code, output)

    def note(self, line: str) -> None:
        """A plain line typed while teaching: a note for the skill being taught (:attr:`teaching` is set)."""
        assert self.teaching is not None, "a note is taken while teaching"
        self.teaching.record_note(line)
        self.out.print(Text("noted", style="dim"), highlight=False)

    async def _draft(self, session: TeachSession) -> None:
        from cortana.cli.markdown import HonestMarkdown as Markdown
        from cortana.learning.skills import SkillError, parse_skill, render_skill
        from cortana.learning.teach import save_skill, skill_file

        with self.console.status("Drafting the skill…", spinner="dots"):
            try:
                skill = await session.draft(await self.agent().client())
            except CortanaError as exc:
                self.console.print(Text(printable(f"No skill drafted: {exc}"), style="red"))
                return
        text = render_skill(skill)
        self.out.print(Text(f"Draft of {skill_file(self.workspace, skill.name).relative_to(self.workspace)}:"))
        self.out.print(Markdown(printable(f"```markdown\n{text}\n```")))
        while True:
            answer = (await self.ask("Keep, edit or drop it? [k/e/d] ")).strip().lower()
            if answer in ("d", "drop", "n", "no"):
                self.out.print("Dropped; nothing was written.", highlight=False)
                return
            if answer in ("e", "edit"):
                edited = await asyncio.to_thread(_edit, text)
                if edited is None:
                    self.out.print("Set $EDITOR (or $VISUAL) to edit drafts; the draft is unchanged.", highlight=False)
                    continue
                try:
                    skill = parse_skill(edited)
                except SkillError as exc:
                    self.out.print(Text(printable(f"The edited draft is not a valid SKILL.md: {exc}")))
                    continue
                text = render_skill(skill)
                self.out.print(Markdown(printable(f"```markdown\n{text}\n```")))
                continue
            if answer in ("k", "keep", "y", "yes"):
                if self.checkpoints is not None:
                    self.checkpoints.begin(self.thread(), f"teach: {skill.name}")
                    self.checkpoints.writing(skill_file(self.workspace, skill.name), text)
                try:
                    path = await asyncio.to_thread(save_skill, self.workspace, skill)
                except UserError as exc:
                    self.out.print(Text(printable(str(exc))))
                    return
                self.out.print(
                    Text(printable(f"Saved {path}. The assistant can load it from the next session on.")),
                    highlight=False,
                )
                return


def _edit(text: str) -> str | None:
    """Open ``text`` in the user's editor and return what they saved; ``None`` without an editor."""
    editor = editor_command()
    if not editor:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".md", prefix="SKILL-", delete=False, encoding="utf-8") as draft:
        draft.write(text)
    path = Path(draft.name)
    try:
        subprocess.run([*shlex.split(editor), str(path)], check=False)
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)

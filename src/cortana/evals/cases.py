"""Cases: the questions ``cortana eval`` asks and what each answer must satisfy, from a YAML file or from Python.

A cases file (docs/evals.md)::

    instructions: Answer briefly.
    cases:
      - name: sum
        input: What is 2+2? Answer with the number only.
        equals: "4"
      - name: capital
        input: What is the capital of France?
        contains: Paris

A case's checks are ``equals``, ``contains``, ``python`` (a ``module:function`` beside the file), ``fields`` (of the
file's ``output_type``) and ``judge`` (a rubric a model reads); a case passes when all of its checks do. A key
that is none of these, a YAML error or a ``module:name`` that cannot be imported is a :class:`CasesError` naming
the file, the key and the fix. Loading a file imports the modules it names: it runs their code, as pytest does.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cortana.engines import UnknownEngine, engine_named, url_problem
from cortana.errors import ConfigError

__all__ = ["CHECKS", "Cases", "CasesError", "EvalCase", "load_cases"]

CHECKS = ("equals", "contains", "python", "fields", "judge")
"""The checks a case may have, by key."""

MAX_FILE_BYTES = 16 << 20
"""The largest cases file read (16 MiB)."""

CASE_KEYS = "a case has name and input, and one or more checks: " + ", ".join(CHECKS) + " (and min_score)"
FILE_KEYS = (
    "the keys of a cases file are cases, instructions, output_type, models, engine, base_url, judge_model, "
    "temperature, max_tokens and name"
)


class CasesError(ConfigError):
    """A cases file, or cases built in Python, that cannot be run: the message names the key and the fix.

    Attributes:
        key: the dotted key at fault (``"cases.2.contains"``).
        source: the cases file, when there is one.
    """


def _imported(reference: str, folder: Path | None) -> Any:
    """What ``module:name`` names, the module imported from ``folder`` first (the cases file's)."""
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name.strip() or not attribute.strip():
        raise ValueError(
            f"{reference!r} is not module:name; name a function or class in a .py file beside the cases file, "
            "such as checks:is_sorted"
        )
    with _importable_from(folder, module_name):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(
                f"cannot import {module_name!r} ({exc}); put {module_name}.py beside the cases file"
            ) from None
        except Exception as exc:  # the user's module raised while it loaded: say what, not where in our code
            raise ValueError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from None
    value: Any = module
    try:
        for part in attribute.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise ValueError(f"{module_name!r} has no {attribute!r}; check the name after the colon") from None
    return value


@contextlib.contextmanager
def _importable_from(folder: Path | None, module_name: str) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while a module is imported; a module of that name imported from elsewhere
    before (another cases file's ``checks``) is imported again from ``folder`` when ``folder`` has it."""
    if folder is None:
        yield
        return
    top = module_name.split(".")[0]
    here = (folder / f"{top}.py").is_file() or (folder / top / "__init__.py").is_file()
    cached = sys.modules.get(top)
    if here and cached is not None and not _inside(getattr(cached, "__file__", None), folder):
        for name in [name for name in sys.modules if name == top or name.startswith(top + ".")]:
            del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


def _inside(file: str | None, folder: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(folder.resolve())


def _folder(info: ValidationInfo) -> Path | None:
    context = info.context or {}
    folder = context.get("folder")
    return Path(folder) if folder is not None else None


class EvalCase(BaseModel):
    """One question and what its answer must satisfy; it passes when every check it has does.

    Attributes:
        name: what the reports call it (unique in its ``Cases``).
        input: the prompt, asked in a new conversation.
        equals: the answer (its surrounding whitespace stripped) equals this; with an ``output_type``, this value
            read as that type.
        contains: the answer holds this text, or each of these (case matters).
        python: a function called with the answer, returning True/False or a score (a number, which passes at
            ``min_score`` or more); in a file, ``module:function`` from a .py file beside it.
        fields: with an ``output_type``, the answer's fields that must have these values (others may be anything).
        judge: a rubric: a model reads the question, the answer and this, and says whether the answer meets it.
        min_score: the least score a ``python`` check's number passes with.
        evaluators: pydantic-evals ``Evaluator`` s of your own (Python only), run beside the checks above; their
            assertions count toward passing, their scores are reported.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    input: str = Field(min_length=1)
    equals: Any = None
    contains: list[str] | None = None
    python: Callable[[Any], Any] | None = None
    fields: dict[str, Any] | None = None
    judge: str | None = Field(default=None, min_length=1)
    min_score: float = 0.5
    evaluators: list[Any] = Field(default_factory=list, exclude=True)

    @field_validator("contains", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        value = _as_text(value)
        return (
            [value]
            if isinstance(value, str)
            else [_as_text(item) for item in value]
            if isinstance(value, list)
            else value
        )

    @field_validator("contains")
    @classmethod
    def _no_empty_text(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(value)):
            raise ValueError("must be a text, or a list of texts, none of them empty")
        return value

    @field_validator("python", mode="before")
    @classmethod
    def _function(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            value = _imported(value, _folder(info))
            if not callable(value):
                raise ValueError(f"names a {type(value).__name__}, not a function")
        return value

    @field_validator("evaluators")
    @classmethod
    def _evaluators(cls, value: list[Any]) -> list[Any]:
        if value:
            from pydantic_evals.evaluators import Evaluator

            wrong = [item for item in value if not isinstance(item, Evaluator)]
            if wrong:
                raise ValueError(f"must be pydantic-evals Evaluator instances, not {type(wrong[0]).__name__}")
        return value

    @model_validator(mode="after")
    def _has_a_check(self) -> EvalCase:
        if not self.checks() and not self.evaluators:
            raise ValueError(f"case {self.name!r} has no check; give it {', '.join(CHECKS[:-1])} or {CHECKS[-1]}")
        return self

    def checks(self) -> list[str]:
        """The keys of the checks this case has, in ``CHECKS`` order."""
        return [check for check in CHECKS if getattr(self, check) is not None]


class Cases(BaseModel):
    """A set of cases and how to ask them: what ``cortana eval CASES.yaml`` reads, or what you build in Python.

    Attributes:
        cases: the cases, each asked in a new conversation.
        instructions: the system prompt of every case.
        output_type: the type each answer is read as (``Agent(output_type=...)``): a pydantic model, dataclass or
            plain type; in a file, ``module:Name`` from a .py file beside it.
        models: the models to run, as ``--models`` takes them (the command line wins).
        engine: the engine of the models that name none (``--engine`` wins; default: cortana.yml, else found).
        base_url: that engine's address (``--base-url`` wins).
        judge_model: the model that judges ``judge`` checks (``--judge-model`` wins; default: the first model).
        temperature: sampling temperature (default 0, the most repeatable; raise it with ``--repeat``).
        max_tokens: the most tokens one answer may have.
        name: what the reports call the set (a file's name).
        folder: where ``module:name`` references were imported from (a file's folder).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    cases: list[EvalCase] = Field(min_length=1)
    instructions: str = ""
    output_type: Any = None
    models: list[str] = Field(default_factory=list)
    engine: str | None = None
    base_url: str | None = None
    judge_model: str | None = None
    temperature: float | None = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    name: str = "eval"
    folder: Path | None = Field(default=None, exclude=True)

    @field_validator("output_type", mode="before")
    @classmethod
    def _output_type(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            value = _imported(value, _folder(info))
        if value is not None and not isinstance(value, type) and getattr(value, "__origin__", None) is None:
            raise ValueError(f"must name a type (a pydantic model, dataclass or plain type), not a {type(value)}")
        return value

    @field_validator("models", mode="before")
    @classmethod
    def _model_list(cls, value: Any) -> Any:
        return [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str | None) -> str | None:
        try:
            return engine_named(value).name if value is not None else None
        except UnknownEngine as error:
            raise ValueError(str(error)) from None

    @field_validator("base_url")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        problem = url_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Cases:
        seen: set[str] = set()
        for case in self.cases:
            if case.name in seen:
                raise ValueError(f"two cases are named {case.name!r}; give each its own name")
            seen.add(case.name)
            self._typed(case)
        return self

    def _typed(self, case: EvalCase) -> None:
        """Check a case's checks against ``output_type``; its ``equals`` is read as that type."""
        if self.output_type is None or self.output_type is str:
            if case.fields is not None:
                raise ValueError(f"case {case.name!r} checks fields, but there is no output_type to read them from")
            case.equals = _as_text(case.equals)
            if case.equals is not None and not isinstance(case.equals, str):
                raise ValueError(
                    f"case {case.name!r}: equals compares the answer's text, not a {type(case.equals).__name__}; "
                    "quote it, or give the cases an output_type"
                )
            return
        if case.contains is not None:
            raise ValueError(
                f"case {case.name!r}: contains looks for text, but answers are {_type_name(self.output_type)}; "
                "check fields, or write a python check"
            )
        if case.equals is not None:
            try:
                case.equals = TypeAdapter(self.output_type).validate_python(case.equals)
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(part) for part in first["loc"])
                raise ValueError(
                    f"case {case.name!r}: equals is no {_type_name(self.output_type)}"
                    f" ({where + ': ' if where else ''}{first['msg']})"
                ) from None


def _as_text(value: Any) -> Any:
    """A number as the text YAML read it from (``contains: 4`` means the text 4); anything else as it is."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind)


def load_cases(path: Path | str) -> Cases:
    """The cases of a YAML file, their ``module:name`` references imported from the file's folder.

    Raises:
        CasesError: the file is missing or unreadable, is not YAML, or holds a key or value a cases file cannot
            have; the message names the file, the key and what to do.
    """
    path = Path(path)
    data = _read_yaml(path)
    data.setdefault("name", path.stem)
    return cases_from(data, source=str(path), folder=path.resolve().parent)


def cases_from(data: Any, *, source: str | None = None, folder: Path | None = None) -> Cases:
    """``Cases`` from a mapping (a file's contents); ``folder``: where its ``module:name`` references are imported
    from (default: as Python finds them)."""
    if not isinstance(data, dict):
        raise CasesError(f"must be a mapping with a list of cases, not a {type(data).__name__}", source=source)
    try:
        cases = Cases.model_validate(data, context={"folder": folder})
    except ValidationError as exc:
        raise _cases_error(exc, data, source) from None
    cases.folder = folder
    return cases


def _read_yaml(path: Path) -> dict[str, Any]:
    """A cases file's mapping, or a ``CasesError`` saying why not and what to do."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CasesError("no such file; give the path of a cases file (docs/evals.md has one)", source=source) from None
    except OSError as exc:
        raise CasesError(f"cannot be read: {exc.strerror or exc}", source=source) from None
    if len(raw) > MAX_FILE_BYTES:
        raise CasesError(f"is {len(raw):,} bytes; a cases file may be at most {MAX_FILE_BYTES:,}", source=source)
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CasesError(f"is not valid UTF-8 (byte {exc.start}); save it as UTF-8", source=source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CasesError(f"is not valid YAML{where}: {exc.problem or exc}", source=source) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise CasesError(f"is not valid YAML: {exc}", source=source) from None
    if data is None:
        raise CasesError("is empty; it needs a list of cases (docs/evals.md has an example)", source=source)
    if not isinstance(data, dict):
        raise CasesError(f"must be a mapping with a list of cases, not a {type(data).__name__}", source=source)
    return data


def _cases_error(exc: ValidationError, data: dict[str, Any], source: str | None) -> CasesError:
    """The first validation error as a ``CasesError`` naming its key, its case and what is allowed."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    key = ".".join(loc) or None
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = f"is not a key of a case; {CASE_KEYS}" if loc[0] == "cases" else f"is not a key; {FILE_KEYS}"
        message += " (docs/evals.md)"
    elif error["type"] == "missing":
        message = "is missing" + ("; " + CASE_KEYS if loc[0] == "cases" else "")
    elif "input" in error and error["type"] not in ("value_error", "assertion_error"):
        got = repr(error["input"])
        message += f" (got {got if len(got) <= 200 else got[:200] + '…'})"
    case = _case_name(data, loc)
    named = f"case {case!r}" if case else ""
    return CasesError(message + (f" ({named})" if named and named not in message else ""), key=key, source=source)


def _case_name(data: dict[str, Any], loc: list[str]) -> str | None:
    """The name of the case ``loc`` points into, when the data gives one."""
    if len(loc) < 2 or loc[0] != "cases" or not loc[1].isdigit():
        return None
    cases = data.get("cases")
    if not isinstance(cases, list) or int(loc[1]) >= len(cases) or not isinstance(cases[int(loc[1])], dict):
        return None
    name = cases[int(loc[1])].get("name")
    return name if isinstance(name, str) else None

"""``cortana eval CASES.yaml``: run a cases file on one or several models, print a table per model, write JSON.

Exit status: 0 when every run of every case passed, 1 when one did not, 2 when the cases cannot be run (a missing
file, bad YAML, an unknown key or check, a model that cannot be found or reached), with one line naming the
cause and the fix, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from cortana.errors import CortanaError

__all__ = ["add_eval_arguments", "run_eval_command"]

NOT_PASSED = 1
BAD_INPUT = 2


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """``cortana eval``'s own arguments: the cases file, the models, the judge, the runs, the JSON report."""
    parser.add_argument("cases", metavar="CASES.yaml", help="the cases file (docs/evals.md)")
    parser.add_argument(
        "--models",
        metavar="A,B",
        help="models to compare, comma-separated: names on --engine (qwen2.5-coder-0.5b), or ENGINE:NAME "
        "(ollama:qwen2.5-coder:1.5b); default: the file's models, else --model, else the configured one",
    )
    parser.add_argument(
        "--judge-model", metavar="NAME", help="the model that judges `judge` checks (default: the first model)"
    )
    parser.add_argument(
        "--repeat", type=_at_least_one, default=1, metavar="N", help="run each case N times and report pass rates"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the whole report, every run's answer, as JSON")


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``args.cases`` and print the tables; the exit status says whether everything passed."""
    if importlib.util.find_spec("pydantic_evals") is None:
        print("cortana eval: needs pydantic-evals; install it with `pip install 'cortana[evals]'`", file=sys.stderr)
        return BAD_INPUT
    import asyncio
    import json

    from rich.console import Console

    from cortana.evals import load_cases, run_eval

    try:
        report_path = _report_path(args.json)
        cases = load_cases(args.cases)
        report = asyncio.run(
            run_eval(
                cases, models=_models(args), engine=args.engine, base_url=args.base_url,
                judge_model=args.judge_model, repeat=args.repeat, context_window=args.context_window,
                threads=args.threads, progress=lambda line: print(f"running {line}", file=sys.stderr, flush=True),
            )
        )  # fmt: skip
    except CortanaError as exc:
        print(f"cortana eval: {exc}", file=sys.stderr)
        return BAD_INPUT
    Console(soft_wrap=False).print(report.tables())
    if report_path is not None:
        report_path.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"report written to {report_path}", file=sys.stderr)
    return 0 if report.passed else NOT_PASSED


def _models(args: argparse.Namespace) -> list[str]:
    """``--models a,b``, else ``--model``; empty: the file's, else the configured model."""
    if args.models is not None:
        names = [name.strip() for name in args.models.split(",") if name.strip()]
        if not names:
            raise _BadArgument("--models: name one model or more, comma-separated (a,b)")
        return names
    return [args.model] if args.model else []


def _report_path(text: str | None) -> Path | None:
    """``--json``'s file, checked before anything runs: its folder must exist, and it must not be a folder."""
    if text is None:
        return None
    path = Path(text)
    if path.is_dir():
        raise _BadArgument(f"--json: {path} is a folder; give the path of a file to write")
    if not path.parent.is_dir():
        raise _BadArgument(f"--json: the folder {path.parent} does not exist; create it or write elsewhere")
    return path


class _BadArgument(CortanaError):
    """A command-line value ``cortana eval`` cannot use."""

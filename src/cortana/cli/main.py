"""Entry point of the ``cortana`` command; imports stay light so ``--help`` is instant.

cortana                      interactive session in the current folder
cortana "question"           answer once and exit
git diff | cortana "review"  piped text is added to the question
cortana doctor               what was found: engine, model, window, embedder, missing parts
cortana models [ACTION NAME] installed models, what fits, how fast; measure, pull, rm, use NAME, warm
cortana trust [--yes]        trust this folder's cortana.yml (MCP servers, allow rules, a remote engine)
cortana init [--yes]         write a first AGENTS.md from what the code graph knows
cortana fix [what]           fix what the failing tests show (or `what`): patches tried in a scratch copy
cortana serve                the assistant over an OpenAI-compatible HTTP API (loopback, with a key)
cortana mcp-serve            the assistant as an MCP server on stdio (tools: ask, search_memory)
cortana acp                  the assistant as an editor's agent (Agent Client Protocol on stdio: Zed, Neovim)
cortana eval CASES.yaml      run cases on one or several models: what passes, how fast, tokens (docs/evals.md)
cortana -p "question" --output-format json|stream-json   one answer for a script (docs/headless.md)
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import traceback
from collections.abc import Callable

from cortana import __version__
from cortana.display import valid_text
from cortana.engines import ENGINE_NAMES, UnknownEngine, engine_named, url_problem
from cortana.errors import CortanaError


def _engine(text: str) -> str:
    """``--engine``'s value: an engine's name, from its name or an alias."""
    try:
        return engine_named(text).name
    except UnknownEngine as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _address(text: str) -> str:
    """``--base-url``: an http(s) address, or a clear error naming the form it takes."""
    problem = url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


COMMANDS = {
    "doctor": "what was found: engine, model, window, embedder, sandbox, and what is missing",
    "models": "installed models, what fits and how fast; measure, pull, rm, use NAME, warm",
    "trust": "trust this folder's cortana.yml (MCP servers, allow rules, a remote engine)",
    "fix": "fix what the failing tests show (or what you ask), patches tried in a scratch copy",
    "init": "write a first AGENTS.md for this project from what the code graph knows (asked first)",
    "serve": "the assistant over an OpenAI-compatible HTTP API (loopback, with a key)",
    "mcp-serve": "the assistant as an MCP server on stdio (tools: ask, search_memory)",
    "acp": "the assistant as an editor's agent over the Agent Client Protocol (Zed, Neovim)",
    "eval": "run a cases file on one or several models: which answers pass, how fast, how many tokens",
}
"""Words that, first on the command line, name a command rather than begin a question; with what each does."""

OUTPUT_FORMATS = ("text", "json", "stream-json")
"""``--output-format``'s choices (docs/headless.md)."""


def _commands_help() -> str:
    width = max(map(len, COMMANDS)) + 2
    lines = [f"  {name:<{width}}{line}" for name, line in COMMANDS.items()]
    usage = (
        "`cortana COMMAND --help` shows a command's options. With no command, `cortana` converses in this folder, "
        '`cortana "question"` answers once, and `cortana -p "question" --output-format json` answers for a script.'
    )
    return "commands:\n" + "\n".join(lines) + "\n\n" + textwrap.fill(usage, 100)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command-line parser (with ``serve``'s options for ``command="serve"``)."""

    parser = argparse.ArgumentParser(
        prog=f"cortana {command}" if command else "cortana",
        usage=None if command else "cortana [options] [prompt ...]\n       cortana COMMAND [options]",
        description=(COMMANDS[command][0].upper() + COMMANDS[command][1:] + ".")
        if command
        else "Cortana: a local-first assistant. With no engine running it starts its own "
        "(llama.cpp on a bundled model).",
        epilog=None if command else _commands_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command == "eval":
        from cortana.cli.evals import add_eval_arguments  # argparse alone: --help stays instant

        add_eval_arguments(parser)
    else:
        parser.add_argument("prompt", nargs="*", help="answer this once and exit (otherwise: interactive)")
    if command in (None, "fix"):
        parser.add_argument(
            "-p",
            "--print",
            action="store_true",
            help="answer once for a script: no questions asked (what needs approval is refused unless --yes), "
            "the answer on stdout",
        )
        parser.add_argument(
            "--output-format",
            choices=OUTPUT_FORMATS,
            help="with -p: text (the answer), json (one object at the end) or stream-json (one event per line "
            "as the turn happens); implies -p",
        )
        parser.add_argument(
            "--plan",
            action="store_true",
            help="plan mode: the assistant only reads and answers with a plan; in a terminal you then accept it "
            "(it is carried out), or not",
        )
        parser.add_argument(
            "--resume",
            metavar="THREAD",
            help="continue a conversation: a thread id (or its first characters) that json output printed, or 'last'",
        )
    parser.add_argument(
        "--engine",
        type=_engine,
        metavar="{" + ",".join(ENGINE_NAMES) + "}",
        help="which engine to use (default: cortana.yml, else the first running one, else the embedded engine); "
        "aliases such as vllm, lmstudio or llama.cpp work too",
    )
    parser.add_argument("--model", help="model name on the engine, or a .gguf path for the embedded engine")
    parser.add_argument("--base-url", type=_address, help="the engine's address, if not the usual one")
    parser.add_argument("--context-window", type=int, help="context window in tokens")
    parser.add_argument("--threads", type=int, help="CPU threads for the embedded engine (default: half the cores)")
    if command != "eval":
        _add_session_arguments(parser)
    parser.add_argument("--version", action="version", version=f"cortana {__version__}")
    if command == "models":
        parser.add_argument("--json", action="store_true", help="the list as JSON, for scripts")
    if command == "serve":
        parser.add_argument("--host", help="address to listen on (default: cortana.yml serve.host, else 127.0.0.1)")
        parser.add_argument("--port", type=int, help="port to listen on (default: cortana.yml serve.port, else 8642)")
        parser.add_argument(
            "--key", help="the bearer key clients must send (default: CORTANA_SERVE_KEY, else one made and kept)"
        )
        parser.add_argument(
            "--allow-remote",
            action="store_true",
            help="listen on an address other machines can reach (clients still need the key; put TLS in front)",
        )
    return parser


def _add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """What a session of the assistant reads: approvals, check-ins, the voice, where a turn's time went."""
    parser.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="allow writes, edits and commands without asking (never protected paths); with `trust`: trust at once",
    )
    parser.add_argument(
        "--no-heartbeat", action="store_true", help="no check-ins in this session (cortana.yml: heartbeat.enabled)"
    )
    parser.add_argument("--voice", action="store_true", help="read replies aloud (espeak-ng; cortana.yml: voice)")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="after each answer, where its time went: first token, prompt tokens read and cached, tokens/s",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (141, quietly, when what read the output went away)."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit: a reader that left is a status, not "Exception ignored"
    except BrokenPipeError:
        return _closed_pipe()
    return status


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _standard_streams()
    command = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(command).parse_args(argv[1:] if command else argv)
    if command == "eval":
        from cortana.cli.evals import run_eval_command

        return _reported(lambda: run_eval_command(args))
    if command in ("serve", "mcp-serve", "acp", "init") and args.prompt:
        print(
            f"cortana {command}: takes no question (clients send them); got {' '.join(args.prompt)!r}", file=sys.stderr
        )
        return 2
    prompt = valid_text(" ".join(args.prompt))  # bytes that are not UTF-8 arrive as lone surrogates
    if command in (None, "fix") and not sys.stdin.isatty():
        piped = _read_piped()
        if piped.strip():
            prompt = f"{prompt}\n\n{piped}" if prompt else piped
    # Imported only past --help: asyncio alone doubles the 25 ms an argparse-only start takes
    # on a 2-core machine, and the session brings pydantic, rich and prompt_toolkit.
    import gc

    # What loads here lives as long as the process: the collector's passes over it while it loads are ~5% of
    # the time to the prompt (issue 16), so it runs after, and ignores these objects from then on.
    gc.disable()
    try:
        import cortana.cli.session  # loaded here, under the rule above; used by _run_command

        if command is None and not prompt:
            import cortana.cli.repl  # noqa: F401  (the interactive session's prompt_toolkit, under the same rule)
    finally:
        gc.freeze()
        gc.enable()

    return _reported(lambda: _run_command(command, args, prompt))


def _run_command(command: str | None, args: argparse.Namespace, prompt: str) -> int:
    """Run the command the arguments name (the session's modules are loaded already)."""
    import asyncio

    from cortana.cli.session import run_session, trust_folder

    if command in (None, "fix") and (args.print or args.output_format):
        from cortana.cli.headless import HeadlessOutput, run_print

        output = HeadlessOutput(args.output_format or "text")
        return asyncio.run(run_print(args, prompt, output, fix=command == "fix"))
    if command == "trust":
        return trust_folder(args)
    if command == "init":
        from cortana.cli.init import run_init

        return asyncio.run(run_init(args))
    if command == "fix":
        return asyncio.run(run_session(args, prompt, fix=True))
    if command == "models":
        from cortana.cli.models import run_models

        return asyncio.run(run_models(args))
    if command in ("serve", "mcp-serve", "acp"):
        from cortana.cli.serve import run_acp, run_mcp_serve, run_serve

        runs = {"serve": run_serve, "mcp-serve": run_mcp_serve, "acp": run_acp}
        return asyncio.run(runs[command](args))
    if command is not None:
        from cortana.cli.doctor import run_command

        return asyncio.run(run_command(command, args))
    return asyncio.run(run_session(args, prompt or None))


def _reported(run: Callable[[], int]) -> int:
    """``run()``'s status; an error it raises becomes one line on stderr and a status (a bug's traceback: a file)."""
    try:
        return run()
    except CortanaError as exc:
        print(f"cortana: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _closed_pipe()
    except OSError as exc:
        print(f"cortana: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug of ours: one line here, the traceback in a file
        report = _save_traceback()
        print(f"cortana: unexpected {type(exc).__name__}: {exc} (details: {report})", file=sys.stderr)
        return 1


def _standard_streams() -> None:
    """Open ``/dev/null`` where stdin, stdout or stderr is closed (``cortana -p ... <&-`` in a script): a file the
    assistant opens later would otherwise take descriptor 0, 1 or 2 and be read or written as if it were one."""
    import os

    for descriptor, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != descriptor:
                os.dup2(null, descriptor)
                os.close(null)
            setattr(sys, name, open(descriptor, mode, encoding="utf-8", errors="replace", closefd=False))  # noqa: SIM115


CLOSED_PIPE_STATUS = 128 + 13
"""The status a program ends with when what reads its output has gone (SIGPIPE), as ``ls | head`` and git do."""


def _closed_pipe() -> int:
    """End quietly when the reader of stdout went away (``cortana models --json | head``): no message, and stdout
    pointed at /dev/null so the flush at exit does not fail again."""
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass
    return CLOSED_PIPE_STATUS


PIPED_LIMIT = 2 << 20
"""The most piped input added to the prompt (2 MiB); more is cut, with a note saying so."""


def _read_piped() -> str:
    """Piped input as text: invalid UTF-8 replaced, cut at ``PIPED_LIMIT`` bytes."""
    data = sys.stdin.buffer.read(PIPED_LIMIT + 1)
    text = data[:PIPED_LIMIT].decode("utf-8", "replace")
    if len(data) > PIPED_LIMIT:
        text += f"\n[... input cut at {PIPED_LIMIT:,} bytes]"
    return text


def _save_traceback() -> str:
    """Write the current exception's traceback beside the engine's log; returns where."""
    from cortana.config import cache_dir  # brings pydantic and yaml; only this error path needs it

    path = cache_dir() / "last-error.txt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
    except OSError:
        return "not saved"
    return str(path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

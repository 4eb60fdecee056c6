"""Entry point of the ``cortana`` command; imports stay light so ``--help`` is instant."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    from cortana import __version__

    parser = argparse.ArgumentParser(
        prog="cortana",
        description="Cortana: a local-first assistant and agent framework for small local models.",
    )
    parser.add_argument("--version", action="version", version=f"cortana {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The journal command: list the entries of a journal file."""

import argparse

from journal.store import read_entries


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="journal", description="List journal entries, oldest first.")
    parser.add_argument("path", help="the journal file")
    parser.add_argument("--limit", type=int, help="show at most this many entries")
    parser.add_argument("--reverse", action="store_true", help="list the newest entries first")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    entries = read_entries(args.path)
    if args.reverse:
        entries.reverse()
    if args.limit is not None:
        entries = entries[: args.limit]
    for entry in entries:
        print(f"{entry.day.isoformat()}  {entry.text}")
    return 0

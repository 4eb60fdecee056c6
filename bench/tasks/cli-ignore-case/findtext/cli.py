"""The findtext command."""

import argparse
from pathlib import Path

from findtext.search import matching_lines


def main(argv: list[str] | None = None) -> int:
    """Print the matching lines (or how many there are); exit 0 when something matched, 1 when nothing did."""
    parser = argparse.ArgumentParser(prog="findtext", description="Print the lines of a file that contain a text.")
    parser.add_argument("needle", help="the text to look for")
    parser.add_argument("path", help="the file to search")
    parser.add_argument("-c", "--count", action="store_true", help="print only how many lines match")
    args = parser.parse_args(argv)
    lines = Path(args.path).read_text().splitlines()
    found = matching_lines(lines, args.needle)
    if args.count:
        print(len(found))
    else:
        for number, line in found:
            print(f"{number}: {line}")
    return 0 if found else 1

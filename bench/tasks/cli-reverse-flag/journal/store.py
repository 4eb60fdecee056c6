"""Reading the journal file."""

from dataclasses import dataclass
from datetime import date
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    day: date
    text: str


def read_entries(path: str | Path) -> list[Entry]:
    """The entries in the file at ``path`` (lines like ``2024-05-01 text``), oldest first."""
    entries = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            day, _, text = line.strip().partition(" ")
            entries.append(Entry(date.fromisoformat(day), text.strip()))
    return sorted(entries, key=lambda entry: entry.day)

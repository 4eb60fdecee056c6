"""Exporting the ledger for a spreadsheet."""

from ledger.money import format_amount
from ledger.statement import Entry


def to_csv(entries: list[Entry]) -> str:
    """A header, then one ``label,amount`` row per entry."""
    lines = ["label,amount"]
    lines += [f"{entry.label},{format_amount(entry.cents)}" for entry in entries]
    return "\n".join(lines) + "\n"

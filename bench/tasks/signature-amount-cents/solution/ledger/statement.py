"""A statement: every entry, then the balance."""

from dataclasses import dataclass

from ledger.money import format_amount


@dataclass(frozen=True)
class Entry:
    label: str
    cents: int


def balance(entries: list[Entry]) -> int:
    """The sum of the entries, in cents."""
    return sum(entry.cents for entry in entries)


def statement(entries: list[Entry]) -> str:
    """One line per entry, the amounts right-aligned, then the balance."""
    rows = [f"{entry.label:<12}{format_amount(entry.cents):>10}" for entry in entries]
    rows.append(f"{'Balance':<12}{format_amount(balance(entries)):>10}")
    return "\n".join(rows)

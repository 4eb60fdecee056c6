"""Invoice numbers: ``INV-00001``, ``INV-00002``, ..."""

from collections.abc import Iterable

from invoicing.config import INVOICE_PREFIX, NUMBER_WIDTH


def format_invoice_number(sequence: int) -> str:
    """The invoice number of the ``sequence``-th invoice, e.g. ``42`` gives ``INV-00042``."""
    if sequence < 1:
        raise ValueError(f"sequence numbers start at 1: {sequence}")
    return f"{INVOICE_PREFIX}-{sequence:0{NUMBER_WIDTH}d}"


def next_invoice_number(existing: Iterable[str]) -> str:
    """The number after the highest of the ``existing`` invoice numbers (``INV-00001`` if there are none)."""
    highest = 0
    for number in existing:
        prefix, _, digits = number.partition("-")
        if prefix == INVOICE_PREFIX and digits.isdigit():
            highest = max(highest, int(digits))
    return format_invoice_number(highest + 1)

"""Money helpers: amounts are Decimal and rounded to whole cents, half up."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def round_money(value: Decimal) -> Decimal:
    """Round ``value`` to whole cents, half up (``0.005`` becomes ``0.01``)."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def to_cents(amount: Decimal) -> int:
    """The amount as a whole number of cents; it must already be rounded to cents."""
    if amount != amount.quantize(CENT):
        raise ValueError(f"not a whole number of cents: {amount}")
    return int(amount * 100)


def from_cents(cents: int) -> Decimal:
    """The amount of ``cents`` cents, e.g. ``1999`` is ``Decimal("19.99")``."""
    return Decimal(cents).scaleb(-2)


def format_amount(amount: Decimal, currency: str = "EUR") -> str:
    """Format an amount for people, e.g. ``1,234.50 EUR`` or ``-3.00 EUR``.

    Only formats: callers round first (see round_money), so nothing is rounded here.
    """
    sign = "-" if amount < 0 else ""
    return f"{sign}{abs(amount):,.2f} {currency}"

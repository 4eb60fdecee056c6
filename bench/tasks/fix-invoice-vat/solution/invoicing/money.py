"""Amounts of money, kept in whole cents."""

VAT_RATE = 0.21


def vat(net_cents: int, rate: float = VAT_RATE) -> int:
    """The VAT on ``net_cents``, rounded to the nearest cent."""
    return round(net_cents * rate)


def format_cents(cents: int) -> str:
    """``cents`` as euros: 2419 -> "€24.19"."""
    euros, rest = divmod(cents, 100)
    return f"€{euros}.{rest:02d}"

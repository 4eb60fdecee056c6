"""Formatting amounts of money."""


def format_amount(cents: int) -> str:
    """``cents`` as euros with two decimals and no thousands separator: 1250 -> "12.50", -5 -> "-0.05"."""
    sign = "-" if cents < 0 else ""
    euros, rest = divmod(abs(cents), 100)
    return f"{sign}{euros}.{rest:02d}"

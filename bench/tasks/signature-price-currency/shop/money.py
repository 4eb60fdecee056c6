"""Formatting amounts of money."""

SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£"}


def format_price(amount: float) -> str:
    """``amount`` in euros, with two decimals and thousands separators: 1234.5 -> "€1,234.50"."""
    return f"€{amount:,.2f}"

"""Formatting amounts of money."""

SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£"}


def format_price(amount: float, currency: str = "EUR") -> str:
    """``amount`` in ``currency``, with two decimals and thousands separators: 1234.5 -> "€1,234.50"."""
    return f"{SYMBOLS[currency]}{amount:,.2f}"

"""Formatting amounts of money."""


def format_amount(euros: float) -> str:
    """``euros`` with two decimals and no thousands separator: 12.5 -> "12.50", -0.05 -> "-0.05"."""
    return f"{euros:.2f}"

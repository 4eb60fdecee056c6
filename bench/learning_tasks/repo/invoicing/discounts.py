"""Discounts: bulk discounts by quantity ordered, and applying a percentage."""

from decimal import Decimal

from invoicing.money import round_money

#: Bulk discount tiers as (minimum quantity, discount in percent), smallest first.
BULK_TIERS: list[tuple[int, Decimal]] = [
    (10, Decimal("2")),
    (50, Decimal("5")),
    (100, Decimal("10")),
]


def bulk_discount_percent(quantity: int) -> Decimal:
    """The bulk discount for an order of ``quantity`` units: the percent of the highest tier reached."""
    for minimum, percent in BULK_TIERS:
        if quantity >= minimum:
            return percent
    return Decimal("0")


def apply_discount(amount: Decimal, percent: Decimal) -> Decimal:
    """``amount`` less ``percent`` percent, in whole cents."""
    if not Decimal("0") <= percent <= Decimal("100"):
        raise ValueError(f"discount must be between 0 and 100 percent: {percent}")
    return round_money(amount * (Decimal("100") - percent) / Decimal("100"))

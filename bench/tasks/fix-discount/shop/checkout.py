"""What the customer pays."""

from shop.prices import apply_discount, with_tax


def final_price(price: float, percent: float = 0) -> float:
    """The price after the discount, with tax."""
    return with_tax(apply_discount(price, percent))

"""Prices with discounts and tax."""

TAX_RATE = 0.2


def apply_discount(price: float, percent: float) -> float:
    """``price`` reduced by ``percent`` per cent."""
    if not 0 <= percent <= 100:
        raise ValueError("percent must be between 0 and 100")
    return price - price * percent / 100


def with_tax(price: float) -> float:
    """``price`` with tax added, rounded to cents."""
    return round(price * (1 + TAX_RATE), 2)

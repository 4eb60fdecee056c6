"""The end-of-day report: one line per order."""

from shop.money import format_price
from shop.orders import Order


def daily_report(orders: list[Order]) -> list[str]:
    """Each order's number and total, biggest order first."""
    ranked = sorted(orders, key=lambda order: order.total(), reverse=True)
    return [f"#{order.number} {format_price(order.total())}" for order in ranked]

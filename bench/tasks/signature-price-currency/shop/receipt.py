"""The receipt printed for one order."""

from shop.money import format_price
from shop.orders import Order


def receipt(order: Order) -> str:
    """One line per item, then the total."""
    lines = [f"Order {order.number}"]
    lines += [f"{name}: {format_price(price)}" for name, price in order.items]
    lines.append(f"Total: {format_price(order.total())}")
    return "\n".join(lines)

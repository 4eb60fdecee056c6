"""The receipt printed at the till."""

from shop.cart import Line, cart_total, item_count


def receipt(lines: list[Line]) -> str:
    """One row per line, then the number of items and the total."""
    rows = [f"{name} x{quantity}: {price * quantity:.2f}" for name, price, quantity in lines]
    rows.append(f"{item_count(lines)} items, total {cart_total(lines):.2f}")
    return "\n".join(rows)

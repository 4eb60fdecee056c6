"""A shopping cart: lines of (name, unit price, quantity)."""

Line = tuple[str, float, int]


def calc_total(lines: list[Line]) -> float:
    """What the lines cost together, rounded to cents."""
    return round(sum(price * quantity for _, price, quantity in lines), 2)


def item_count(lines: list[Line]) -> int:
    """How many items the cart holds."""
    return sum(quantity for _, _, quantity in lines)

"""Line items: what an invoice charges for."""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from invoicing.money import round_money


@dataclass(frozen=True)
class LineItem:
    """``quantity`` units of something at ``unit_price`` each (a net price, before tax)."""

    description: str
    quantity: int
    unit_price: Decimal

    def __post_init__(self) -> None:
        if self.quantity <= 0:
            raise ValueError(f"quantity must be positive: {self.quantity}")
        if self.unit_price < 0:
            raise ValueError(f"unit price must not be negative: {self.unit_price}")


def line_total(item: LineItem) -> Decimal:
    """The net total of one line: quantity times unit price, in whole cents."""
    return round_money(item.unit_price * item.quantity)


def total_quantity(items: Iterable[LineItem]) -> int:
    """How many units the lines order in all (the bulk discount depends on it)."""
    return sum(item.quantity for item in items)

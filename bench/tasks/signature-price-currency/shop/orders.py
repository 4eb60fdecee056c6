"""Orders: what was bought, and in which currency."""

from dataclasses import dataclass, field


@dataclass
class Order:
    number: int
    items: list[tuple[str, float]] = field(default_factory=list)
    currency: str = "EUR"

    def total(self) -> float:
        """The sum of the items' prices."""
        return sum(price for _, price in self.items)

"""Invoices: lines, subtotal, VAT and total."""

from dataclasses import dataclass, field

from invoicing.money import format_cents, vat


@dataclass
class Line:
    description: str
    unit_cents: int
    quantity: int = 1

    @property
    def cents(self) -> int:
        return self.unit_cents * self.quantity


@dataclass
class Invoice:
    number: str
    lines: list[Line] = field(default_factory=list)

    def add(self, description: str, unit_cents: int, quantity: int = 1) -> None:
        """Add a line of ``quantity`` times ``unit_cents``."""
        self.lines.append(Line(description, unit_cents, quantity))

    def subtotal(self) -> int:
        """The sum of the lines, before VAT."""
        return sum(line.cents for line in self.lines)

    def tax(self) -> int:
        """The VAT on the subtotal."""
        return vat(self.subtotal())

    def total(self) -> int:
        """What the customer pays: subtotal plus VAT."""
        return self.subtotal() + self.tax()

    def summary(self) -> str:
        return f"Invoice {self.number}: {format_cents(self.total())}"

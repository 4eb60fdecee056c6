"""The Invoice: a customer, the date it was issued, and its line items."""

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from invoicing.customers import Customer
from invoicing.discounts import apply_discount, bulk_discount_percent
from invoicing.due_dates import due_date_for
from invoicing.line_items import LineItem, line_total, total_quantity
from invoicing.money import format_amount
from invoicing.taxes import tax_for


@dataclass
class Invoice:
    """One invoice. Totals are computed from the lines: net of the bulk discount, then tax on top."""

    number: str
    customer: Customer
    issued: date
    items: list[LineItem] = field(default_factory=list)
    paid: bool = False

    def subtotal(self) -> Decimal:
        """The sum of the line totals, before discount and tax."""
        return sum((line_total(item) for item in self.items), Decimal("0.00"))

    def discount_percent(self) -> Decimal:
        """The bulk discount the whole order earns."""
        return bulk_discount_percent(total_quantity(self.items))

    def net(self) -> Decimal:
        """The subtotal less the bulk discount."""
        return apply_discount(self.subtotal(), self.discount_percent())

    def tax(self) -> Decimal:
        """The tax on the net amount, at the rate of the customer's region."""
        return tax_for(self.customer.region, self.net())

    def total(self) -> Decimal:
        """What the customer pays: net plus tax."""
        return self.net() + self.tax()

    @property
    def due(self) -> date:
        """The date this invoice must be paid by."""
        return due_date_for(self.issued)

    def describe(self) -> str:
        """One line for people, e.g. ``INV-00042 Acme GmbH: 1,190.00 EUR``."""
        return f"{self.number} {self.customer.name}: {format_amount(self.total(), self.customer.currency)}"

"""Builders shared by the tests."""

from datetime import date
from decimal import Decimal
from typing import Any

from invoicing.customers import Customer
from invoicing.invoice import Invoice
from invoicing.line_items import LineItem

ISSUED = date(2024, 3, 1)


def make_customer(region: str = "DE", **fields: Any) -> Customer:
    """A customer in ``region``; ``fields`` override the other attributes."""
    return Customer(name="Acme GmbH", email="billing@acme.example", region=region, **fields)


def make_invoice(
    quantity: int = 2, unit_price: str = "10.00", region: str = "DE", issued: date = ISSUED, paid: bool = False
) -> Invoice:
    """An invoice with one line of ``quantity`` widgets at ``unit_price``."""
    items = [LineItem("widget", quantity, Decimal(unit_price))]
    return Invoice("INV-00001", make_customer(region), issued, items, paid)

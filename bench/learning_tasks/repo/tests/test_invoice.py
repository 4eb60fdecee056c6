from datetime import date
from decimal import Decimal

from helpers import make_invoice


def test_totals_without_discount() -> None:
    invoice = make_invoice(quantity=3, unit_price="19.99", region="DE")
    assert invoice.subtotal() == Decimal("59.97")
    assert invoice.net() == Decimal("59.97")
    assert invoice.tax() == Decimal("11.39")
    assert invoice.total() == Decimal("71.36")


def test_small_bulk_discount() -> None:
    invoice = make_invoice(quantity=20, unit_price="5.00", region="FR")
    assert invoice.net() == Decimal("98.00")
    assert invoice.total() == Decimal("117.60")


def test_due_date_and_description() -> None:
    invoice = make_invoice(issued=date(2024, 1, 15))
    assert invoice.due == date(2024, 2, 14)
    assert invoice.describe() == "INV-00001 Acme GmbH: 23.80 EUR"

from datetime import date
from decimal import Decimal

from helpers import make_invoice
from invoicing.reports import aging_bucket, outstanding_total, overdue_invoices, revenue_by_region, summary_line


def test_overdue_invoices_are_unpaid_and_past_due() -> None:
    old = make_invoice(issued=date(2024, 1, 1))
    paid = make_invoice(issued=date(2024, 1, 1), paid=True)
    recent = make_invoice(issued=date(2024, 3, 1))
    assert overdue_invoices([recent, paid, old], today=date(2024, 3, 10)) == [old]


def test_aging_buckets() -> None:
    assert aging_bucket(0) == "current"
    assert aging_bucket(1) == "1-30"
    assert aging_bucket(31) == "31-60"
    assert aging_bucket(200) == "90+"


def test_outstanding_and_revenue() -> None:
    invoices = [make_invoice(region="DE"), make_invoice(region="US", paid=True), make_invoice(region="us", paid=True)]
    assert outstanding_total(invoices) == Decimal("23.80")
    assert revenue_by_region(invoices) == {"US": Decimal("40.00")}


def test_summary_line() -> None:
    invoices = [make_invoice(issued=date(2024, 1, 1)), make_invoice(issued=date(2024, 3, 1))]
    assert summary_line(invoices, date(2024, 3, 10)) == "1 overdue, 47.60 EUR outstanding, oldest 39 days late"

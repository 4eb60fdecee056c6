"""Reports over many invoices: what is overdue, how late, and where the revenue comes from."""

from collections.abc import Iterable
from datetime import date
from decimal import Decimal

from invoicing.config import PAYMENT_TERMS_DAYS
from invoicing.due_dates import days_late, is_overdue
from invoicing.invoice import Invoice
from invoicing.money import format_amount


def overdue_invoices(invoices: Iterable[Invoice], today: date) -> list[Invoice]:
    """The unpaid invoices whose due date has passed, oldest first."""
    late = [invoice for invoice in invoices if not invoice.paid and is_overdue(invoice.due, today)]
    return sorted(late, key=lambda invoice: invoice.issued)


def outstanding_total(invoices: Iterable[Invoice]) -> Decimal:
    """What the unpaid invoices add up to, tax included."""
    return sum((invoice.total() for invoice in invoices if not invoice.paid), Decimal("0.00"))


def aging_bucket(late_days: int) -> str:
    """The aging bucket of an invoice ``late_days`` past due: one bucket per payment term, then "90+"."""
    if late_days <= 0:
        return "current"
    terms = (late_days - 1) // PAYMENT_TERMS_DAYS
    if terms >= 3:
        return f"{3 * PAYMENT_TERMS_DAYS}+"
    return f"{terms * PAYMENT_TERMS_DAYS + 1}-{(terms + 1) * PAYMENT_TERMS_DAYS}"


def revenue_by_region(invoices: Iterable[Invoice]) -> dict[str, Decimal]:
    """The net revenue (before tax) of the paid invoices, by the customer's region."""
    revenue: dict[str, Decimal] = {}
    for invoice in invoices:
        if invoice.paid:
            region = invoice.customer.region.upper()
            revenue[region] = revenue.get(region, Decimal("0.00")) + invoice.net()
    return revenue


def summary_line(invoices: list[Invoice], today: date) -> str:
    """One line for the dashboard, e.g. ``3 overdue, 1,234.50 EUR outstanding, oldest 12 days late``."""
    # TODO: group by currency once customers in several currencies are invoiced
    late = overdue_invoices(invoices, today)
    oldest = max((days_late(invoice.due, today) for invoice in late), default=0)
    outstanding = format_amount(outstanding_total(invoices))
    return f"{len(late)} overdue, {outstanding} outstanding, oldest {oldest} days late"

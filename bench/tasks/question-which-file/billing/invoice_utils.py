"""Questions about many invoices at once."""

from datetime import date

from billing.documents import Invoice


def overdue(invoices: list[Invoice], today: date) -> list[Invoice]:
    """The unpaid invoices whose due date has passed."""
    return [invoice for invoice in invoices if not invoice.paid and invoice.due < today]


def outstanding(invoices: list[Invoice]) -> float:
    """What customers still owe."""
    return sum(invoice.amount for invoice in invoices if not invoice.paid)

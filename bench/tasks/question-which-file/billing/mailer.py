"""The reminder e-mail for an overdue invoice."""

from billing.documents import Invoice


def reminder(invoice: Invoice) -> str:
    """The text of the reminder."""
    return f"Dear {invoice.customer}, invoice {invoice.number} ({invoice.amount:.2f}) was due on {invoice.due}."

"""Due dates: when an invoice must be paid, and whether it is late."""

from datetime import date, timedelta

from invoicing.config import PAYMENT_TERMS_DAYS


def due_date_for(issued: date, terms_days: int = PAYMENT_TERMS_DAYS) -> date:
    """The date an invoice issued on ``issued`` must be paid by."""
    return issued + timedelta(days=terms_days)


def is_overdue(due: date, today: date) -> bool:
    """True once the due date has passed: an invoice paid on its due date is on time."""
    return today >= due


def days_late(due: date, today: date) -> int:
    """How many days after the due date ``today`` is (0 if it is not after it)."""
    return max(0, (today - due).days)

"""Customers, their credit limits, and the holds that stop new invoices."""

import re
from dataclasses import dataclass
from decimal import Decimal

from invoicing.config import DEFAULT_CURRENCY, MAX_OVERDUE_INVOICES
from invoicing.errors import CreditError

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.IGNORECASE)


@dataclass
class Customer:
    """A customer: where they are taxed, what they owe, and how many of their invoices are overdue."""

    name: str
    email: str
    region: str
    currency: str = DEFAULT_CURRENCY
    credit_limit: Decimal = Decimal("5000.00")
    balance: Decimal = Decimal("0.00")
    overdue_count: int = 0


def validate_email(email: str) -> str:
    """``email`` without surrounding spaces, if it looks like an email address."""
    email = email.strip()
    if not _EMAIL.match(email):
        raise ValueError(f"invalid email: {email!r}")
    return email


def check_credit(customer: Customer, amount: Decimal) -> None:
    """Refuse an invoice of ``amount`` that would take the customer over their credit limit."""
    if customer.balance + amount > customer.credit_limit:
        raise CreditError(f"credit limit exceeded for {customer.name}")


def check_can_invoice(customer: Customer) -> None:
    """Refuse any new invoice for a customer with too many overdue invoices."""
    if customer.overdue_count >= MAX_OVERDUE_INVOICES:
        raise CreditError(f"account on hold: {customer.name} has {customer.overdue_count} overdue invoices")

"""The documents the billing system sends."""

from dataclasses import dataclass
from datetime import date


@dataclass
class Invoice:
    """A bill sent to a customer."""

    number: str
    customer: str
    amount: float
    due: date
    paid: bool = False


@dataclass
class CreditNote:
    """Money given back to a customer, against an invoice."""

    number: str
    invoice_number: str
    amount: float

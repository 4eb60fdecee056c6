from decimal import Decimal

import pytest
from helpers import make_customer
from invoicing.customers import check_can_invoice, check_credit, validate_email
from invoicing.errors import CreditError


def test_validate_email() -> None:
    assert validate_email("  ann@example.com ") == "ann@example.com"
    with pytest.raises(ValueError, match="invalid email"):
        validate_email("ann@example")


def test_credit_limit() -> None:
    customer = make_customer(balance=Decimal("4900.00"))
    check_credit(customer, Decimal("100.00"))
    with pytest.raises(CreditError, match="credit limit exceeded"):
        check_credit(customer, Decimal("100.01"))


def test_customer_in_good_standing_can_be_invoiced() -> None:
    check_can_invoice(make_customer(overdue_count=1))

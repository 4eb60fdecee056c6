from decimal import Decimal

import pytest
from invoicing.discounts import apply_discount, bulk_discount_percent


def test_no_bulk_discount_below_ten_units() -> None:
    assert bulk_discount_percent(9) == Decimal("0")


def test_first_tier() -> None:
    assert bulk_discount_percent(10) == Decimal("2")
    assert bulk_discount_percent(25) == Decimal("2")


def test_apply_discount() -> None:
    assert apply_discount(Decimal("200.00"), Decimal("5")) == Decimal("190.00")
    assert apply_discount(Decimal("9.99"), Decimal("0")) == Decimal("9.99")


def test_apply_discount_refuses_more_than_everything() -> None:
    with pytest.raises(ValueError):
        apply_discount(Decimal("10.00"), Decimal("120"))

from decimal import Decimal

import pytest
from invoicing.money import format_amount, from_cents, round_money, to_cents


def test_round_money_rounds_half_up() -> None:
    assert round_money(Decimal("2.675")) == Decimal("2.68")
    assert round_money(Decimal("2.674")) == Decimal("2.67")


def test_cents_round_trip() -> None:
    assert to_cents(Decimal("19.99")) == 1999
    assert from_cents(1999) == Decimal("19.99")


def test_to_cents_refuses_fractions_of_a_cent() -> None:
    with pytest.raises(ValueError, match="whole number of cents"):
        to_cents(Decimal("0.001"))


def test_format_amount() -> None:
    assert format_amount(Decimal("1234.5")) == "1,234.50 EUR"
    assert format_amount(Decimal("-3"), "USD") == "-3.00 USD"

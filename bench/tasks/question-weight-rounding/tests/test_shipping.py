import pytest
from shipping.rates import quote


def test_domestic_quote():
    assert quote(1.0) == 5.2


def test_weight_is_billed_by_the_half_kilogram():
    assert quote(1.2, "europe") == quote(1.5, "europe") == 12.75


def test_world_quote():
    assert quote(0.1, "world") == 18.0


def test_empty_parcel():
    with pytest.raises(ValueError):
        quote(0)

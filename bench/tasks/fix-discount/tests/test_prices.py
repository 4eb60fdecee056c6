from shop.checkout import final_price
from shop.prices import apply_discount, with_tax


def test_ten_percent_off():
    assert apply_discount(200, 10) == 180


def test_no_discount():
    assert apply_discount(50, 0) == 50


def test_tax():
    assert with_tax(10) == 12.0


def test_final_price():
    assert final_price(100, 50) == 60.0

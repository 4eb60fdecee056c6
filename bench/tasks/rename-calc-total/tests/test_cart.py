from shop.cart import calc_total, item_count
from shop.receipt import receipt

LINES = [("apple", 0.5, 4), ("bread", 2.25, 1)]


def test_total():
    assert calc_total(LINES) == 4.25
    assert calc_total([]) == 0


def test_item_count():
    assert item_count(LINES) == 5


def test_receipt():
    assert receipt(LINES).splitlines() == ["apple x4: 2.00", "bread x1: 2.25", "5 items, total 4.25"]

from shop.money import format_price
from shop.orders import Order
from shop.receipt import receipt
from shop.report import daily_report


def test_euros_by_default():
    assert format_price(3.5) == "€3.50"
    assert format_price(1234.5) == "€1,234.50"


def test_other_currencies():
    assert format_price(3.5, "USD") == "$3.50"
    assert format_price(1234.5, currency="GBP") == "£1,234.50"


def test_receipt_in_the_order_currency():
    order = Order(7, [("tea", 2.5), ("cake", 3.0)], currency="USD")
    assert receipt(order) == "Order 7\ntea: $2.50\ncake: $3.00\nTotal: $5.50"


def test_receipt_in_euros():
    assert receipt(Order(8, [("coffee", 2.2)])) == "Order 8\ncoffee: €2.20\nTotal: €2.20"


def test_daily_report_in_each_order_currency():
    orders = [Order(1, [("scarf", 20.0)], currency="GBP"), Order(2, [("mug", 1.25)]), Order(3, [("hat", 35.0)], "USD")]
    assert daily_report(orders) == ["#3 $35.00", "#1 £20.00", "#2 €1.25"]

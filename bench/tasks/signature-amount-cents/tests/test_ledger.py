from ledger.export import to_csv
from ledger.money import format_amount
from ledger.statement import Entry, statement

ENTRIES = [Entry("salary", 250000), Entry("rent", -95000), Entry("coffee", -5)]


def test_format_amount_takes_cents():
    assert format_amount(1250) == "12.50"
    assert format_amount(1999) == "19.99"
    assert format_amount(0) == "0.00"
    assert format_amount(-5) == "-0.05"
    assert format_amount(100000) == "1000.00"


def test_statement():
    assert statement(ENTRIES).splitlines() == [
        "salary         2500.00",
        "rent           -950.00",
        "coffee           -0.05",
        "Balance        1549.95",
    ]


def test_csv_export():
    assert to_csv(ENTRIES) == "label,amount\nsalary,2500.00\nrent,-950.00\ncoffee,-0.05\n"

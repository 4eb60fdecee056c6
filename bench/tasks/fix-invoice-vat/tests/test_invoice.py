from invoicing.invoice import Invoice


def make_invoice() -> Invoice:
    invoice = Invoice("2024-017")
    invoice.add("pen", 150, 2)
    invoice.add("notebook", 1699)
    return invoice


def test_subtotal():
    assert make_invoice().subtotal() == 1999


def test_vat_is_rounded_to_the_nearest_cent():
    assert make_invoice().tax() == 420


def test_total():
    assert make_invoice().total() == 2419


def test_summary():
    assert make_invoice().summary() == "Invoice 2024-017: €24.19"


def test_empty_invoice():
    assert Invoice("empty").total() == 0

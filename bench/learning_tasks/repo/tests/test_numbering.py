import pytest
from invoicing.numbering import format_invoice_number, next_invoice_number


def test_format_invoice_number() -> None:
    assert format_invoice_number(42) == "INV-00042"
    with pytest.raises(ValueError):
        format_invoice_number(0)


def test_next_invoice_number() -> None:
    assert next_invoice_number([]) == "INV-00001"
    assert next_invoice_number(["INV-00007", "INV-00012", "DRAFT-99999"]) == "INV-00013"

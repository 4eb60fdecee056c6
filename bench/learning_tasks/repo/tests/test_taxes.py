from decimal import Decimal

import pytest
from invoicing.errors import UnknownRegionError
from invoicing.taxes import tax_for, tax_rate


def test_tax_rate_ignores_case() -> None:
    assert tax_rate("de") == Decimal("0.19")


def test_tax_for_rounds_to_cents() -> None:
    assert tax_for("DE", Decimal("10.05")) == Decimal("1.91")
    assert tax_for("US", Decimal("99.99")) == Decimal("0.00")


def test_unknown_region() -> None:
    with pytest.raises(UnknownRegionError, match="unknown region: XX"):
        tax_rate("XX")

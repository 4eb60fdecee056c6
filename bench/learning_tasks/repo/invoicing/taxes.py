"""Sales tax by region."""

from decimal import ROUND_HALF_UP, Decimal

from invoicing.errors import UnknownRegionError

#: Tax rates by region code, as fractions (``0.19`` is 19 %).
TAX_RATES: dict[str, Decimal] = {
    "DE": Decimal("0.19"),
    "FR": Decimal("0.20"),
    "UK": Decimal("0.20"),
    "US": Decimal("0.00"),  # TODO: US sales tax depends on the state
}


def tax_rate(region: str) -> Decimal:
    """The tax rate of ``region`` (a code such as ``"DE"``, any case)."""
    try:
        return TAX_RATES[region.upper()]
    except KeyError:
        raise UnknownRegionError(f"unknown region: {region}") from None


def tax_for(region: str, amount: Decimal) -> Decimal:
    """The tax on the net ``amount`` in ``region``, in whole cents."""
    # TODO: round with money.round_money like the other modules do
    return (amount * tax_rate(region)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

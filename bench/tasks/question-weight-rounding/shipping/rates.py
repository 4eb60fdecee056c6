"""Prices for sending a parcel."""

from shipping.weights import billable_weight

BASE_FEE = {"domestic": 4.0, "europe": 9.0, "world": 15.0}
PER_KG = {"domestic": 1.2, "europe": 2.5, "world": 6.0}


def quote(kg: float, zone: str = "domestic") -> float:
    """What sending a parcel of ``kg`` kilograms to ``zone`` costs, in euros."""
    weight = billable_weight(kg)
    return round(BASE_FEE[zone] + PER_KG[zone] * weight, 2)

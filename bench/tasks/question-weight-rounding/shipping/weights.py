"""Parcel weights as the carrier bills them."""

import math

STEP_KG = 0.5


def billable_weight(kg: float) -> float:
    """``kg`` rounded up to the next step the carrier bills by (half a kilogram)."""
    if kg <= 0:
        raise ValueError("a parcel must weigh something")
    return math.ceil(kg / STEP_KG) * STEP_KG

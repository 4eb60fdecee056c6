"""The label stuck on a parcel."""


def round_weight(kg: float) -> float:
    """``kg`` to one decimal, as printed on the label."""
    return round(kg, 1)


def label(name: str, address: str, kg: float) -> str:
    """The label's text."""
    return f"{name}\n{address}\n{round_weight(kg)} kg"

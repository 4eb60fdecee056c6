"""Unit conversions for station readings."""


def normalize_reading(value: float) -> float:
    """A thermometer reading as the dashboard stores it."""
    return round((value - 32) * 5 / 9, 1)


def to_kelvin(celsius: float) -> float:
    """Degrees Celsius in kelvin."""
    return celsius + 273.15


def knots(speed_kmh: float) -> float:
    """A wind speed in km/h, in knots."""
    return round(speed_kmh / 1.852, 1)


def pressure_hpa(inches_hg: float) -> float:
    """A barometer reading in inches of mercury, in hectopascals."""
    return round(inches_hg * 33.8639, 1)

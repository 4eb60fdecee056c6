"""One reading of every sensor."""

from dataclasses import dataclass

from weather.convert import knots, normalize_reading, pressure_hpa


@dataclass
class Reading:
    """What the dashboard shows."""

    temperature: float
    wind: float
    pressure: float


def read(raw: dict[str, float]) -> Reading:
    """A reading from the station's raw values (Fahrenheit, km/h, inches of mercury)."""
    return Reading(normalize_reading(raw["temp_f"]), knots(raw["wind_kmh"]), pressure_hpa(raw["baro_in"]))

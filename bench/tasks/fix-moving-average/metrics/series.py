"""A series of measurements taken at regular intervals."""

from metrics.windows import windows


class Series:
    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def __len__(self) -> int:
        return len(self.values)

    def mean(self) -> float:
        """The mean of all values."""
        return sum(self.values) / len(self.values)

    def moving_average(self, size: int) -> list[float]:
        """The mean of every window of ``size`` consecutive values."""
        return [sum(window) / size for window in windows(self.values, size)]

    def peak_window(self, size: int) -> int:
        """Where the window of ``size`` values with the highest mean starts."""
        averages = self.moving_average(size)
        return averages.index(max(averages))

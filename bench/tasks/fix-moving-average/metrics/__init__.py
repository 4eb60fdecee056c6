"""Time series of measurements."""

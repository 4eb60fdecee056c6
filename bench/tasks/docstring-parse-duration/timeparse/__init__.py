"""Durations written the short way: 1h30m, 45s."""

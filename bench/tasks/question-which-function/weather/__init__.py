"""Readings from a home weather station."""

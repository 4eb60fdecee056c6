"""Summaries of measurements."""

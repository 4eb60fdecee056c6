"""Positions on a text screen."""

"""Small helpers for lists and tags."""

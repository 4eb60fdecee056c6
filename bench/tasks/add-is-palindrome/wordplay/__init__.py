"""Word games."""

"""Text helpers for a blog."""

"""A plain-text journal: one dated entry per line."""

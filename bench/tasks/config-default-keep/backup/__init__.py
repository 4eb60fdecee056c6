"""Nightly backups, and pruning the old ones."""

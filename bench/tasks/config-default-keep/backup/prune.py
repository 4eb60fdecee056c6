"""Choosing which backups to delete."""

from backup.config import load_config


def to_delete(backups: list[str], keep: int) -> list[str]:
    """The backups to delete: all but the ``keep`` newest (the names sort oldest first)."""
    ordered = sorted(backups)
    return ordered[: len(ordered) - keep] if keep < len(ordered) else []


def plan(config_text: str, backups: list[str]) -> list[str]:
    """The backups to delete under the configuration ``config_text``."""
    return to_delete(backups, load_config(config_text).keep)

"""User accounts."""

from accounts.models import UserRecord

__all__ = ["UserRecord"]

"""User accounts."""

from accounts.models import UserRec

__all__ = ["UserRec"]

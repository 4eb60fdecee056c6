"""What the app knows about a user."""

from dataclasses import dataclass


@dataclass(frozen=True)
class UserRecord:
    """One user: a display name and an e-mail address."""

    name: str
    email: str

    def display(self) -> str:
        """``Ada <ada@example.org>``."""
        return f"{self.name} <{self.email}>"

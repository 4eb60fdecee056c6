"""Users kept in memory, by e-mail address."""

from accounts.models import UserRecord


class UserStore:
    """The users of the app."""

    def __init__(self) -> None:
        self._users: dict[str, UserRecord] = {}

    def add(self, name: str, email: str) -> UserRecord:
        """Add a user; an address can only be used once."""
        key = email.lower()
        if key in self._users:
            raise ValueError(f"{email} is already registered")
        user = UserRecord(name, key)
        self._users[key] = user
        return user

    def find(self, email: str) -> UserRecord | None:
        """The user with this address, if any."""
        return self._users.get(email.lower())

"""A note."""

from dataclasses import dataclass

from notes.text import title


@dataclass
class Note:
    """A note: its text, and the tags the user gave it."""

    text: str
    tags: tuple[str, ...] = ()

    @property
    def heading(self) -> str:
        """What the list of notes shows."""
        return title(self.text) or "(untitled)"

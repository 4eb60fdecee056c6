"""Name badges for an event."""

from contacts.names import initials, tidy


def badge(full_name: str, company: str = "") -> str:
    """The badge text: initials in brackets, the tidied name, and the company if there is one."""
    text = f"[{initials(full_name)}] {tidy(full_name)}"
    return f"{text} ({company})" if company else text


def badges(guests: list[tuple[str, str]]) -> list[str]:
    """One badge per (name, company) pair, sorted by name."""
    return [badge(name, company) for name, company in sorted(guests, key=lambda guest: tidy(guest[0]))]

"""Working with people's names."""


def initials(full_name: str) -> str:
    """The first letter of each part of ``full_name``, upper-cased: "ada lovelace" -> "AL"."""
    return "".join(part[0].upper() for part in full_name.split())


def tidy(full_name: str) -> str:
    """``full_name`` with single spaces between its parts, each part capitalized."""
    return " ".join(part.capitalize() for part in full_name.split())

"""Splitting a list of items into pages."""


def page_count(total: int, per_page: int) -> int:
    """How many pages ``total`` items fill at ``per_page`` items a page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return total // per_page


def page_items(items: list[str], page: int, per_page: int) -> list[str]:
    """The items on ``page``, counted from 1."""
    start = (page - 1) * per_page
    return items[start : start + per_page]

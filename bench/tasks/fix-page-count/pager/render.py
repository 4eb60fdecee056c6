"""The line shown under a paged list."""

from pager.pages import page_count


def footer(total: int, per_page: int, page: int) -> str:
    """``page 2 of 3``."""
    return f"page {page} of {page_count(total, per_page)}"

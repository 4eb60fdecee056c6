"""Addresses of blog posts."""

from textkit.slug import slugify


def post_url(title: str) -> str:
    """The address of the post called ``title``."""
    return f"/posts/{slugify(title)}/"

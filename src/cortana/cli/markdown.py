"""Markdown for the terminal where a link cannot say one thing and go to another.

A model (or a file it quotes) can write ``[https://github.com/you/project](http://evil.example/phish)``:
rich would print the first address as a clickable terminal hyperlink (OSC 8) to the second. Here a link
stays a hyperlink only when what it shows is where it goes (``<https://example.org>``); any other link
is printed as its text followed by its target in brackets, and is not clickable. An image is its alt
text and its address. Imported when a reply is first shown: rich's Markdown is not needed for the prompt.
"""

from __future__ import annotations

from typing import Any

from markdown_it.token import Token
from rich.markdown import Markdown

__all__ = ["HonestMarkdown"]


class HonestMarkdown(Markdown):
    """rich's :class:`~rich.markdown.Markdown`, with every link showing its real target (see the module docstring)."""

    def __init__(self, markup: str, **options: Any) -> None:
        super().__init__(markup, **options)
        for token in self.parsed:
            if token.children:
                token.children = _honest(token.children)


def _honest(children: list[Token]) -> list[Token]:
    kept: list[Token] = []
    index = 0
    while index < len(children):
        token = children[index]
        if token.type == "image":
            source = str(token.attrs.get("src", ""))
            kept.append(_text(f"[image: {token.content or 'no description'}] ({source})"))
            index += 1
            continue
        if token.type != "link_open":
            kept.append(token)
            index += 1
            continue
        end = _closing(children, index)
        inner = _honest(children[index + 1 : end])
        target = str(token.attrs.get("href", ""))
        shown = "".join(child.content for child in inner if child.type in ("text", "code_inline"))
        if shown.strip() in (target, target.removeprefix("mailto:")) and end < len(children):
            kept += [token, *inner, children[end]]  # it shows where it goes: a real hyperlink
        else:
            kept += [*inner, _text(f" ({target})")]
        index = end + 1
    return kept


def _closing(children: list[Token], start: int) -> int:
    """The index of the ``link_close`` that matches the ``link_open`` at ``start`` (the end when there is none)."""
    depth = 0
    for index in range(start, len(children)):
        if children[index].type == "link_open":
            depth += 1
        elif children[index].type == "link_close":
            depth -= 1
            if depth == 0:
                return index
    return len(children)


def _text(content: str) -> Token:
    return Token("text", "", 0, content=content)

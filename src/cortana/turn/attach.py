"""The images a typed message points at: ``@shot.png`` and a pasted path to an image file, attached to its turn.

:meth:`cortana.Assistant.turn` calls :func:`attach_images` for the front ends whose prompt the user typed at this
machine (the terminal, ``cortana "question"``, ``cortana -p``): one place, so they agree. The text keeps every
path as it was written; the images go with the message.

- ``@NAME`` (a word that starts with ``@`` and ends in ``.png``, ``.jpg``, ``.jpeg``, ``.gif`` or ``.webp``)
  attaches that file. A relative name is resolved by the file tools' :class:`~cortana.tools.builtin.Workspace`
  (no ``..`` or symlink out of the workspace) and read through its opener (no link followed); an absolute one (or
  ``~/…``) the user typed is theirs to name. A name that is no such file, or no image, is a :class:`UserError`
  before anything is sent: an image the user asked for never goes missing in silence.
- A pasted absolute path (``/home/me/Pictures/shot.png``, quoted or with ``\\ `` before its spaces, as terminals
  paste a dragged file) to an existing image is attached when the model can be shown images; with a text-only
  model it stays a path in the text ("rename ~/shots/a.png" is a request about a file, not a picture).

Only what the user typed is read here: a path the model writes reaches no image, ever (tools read files, and they
hand the model text).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cortana.errors import ToolError, UserError
from cortana.messages import MAX_IMAGES, Image, ImageError
from cortana.tools.builtin.workspace import Workspace

__all__ = ["IMAGE_SUFFIXES", "Attachments", "attach_images", "image_mentions"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
"""The file name endings a mention must have to be read as an image."""

_WORD = re.compile(r"""(?<!\S)(@?)(?:"([^"\n]+)"|'([^'\n]+)'|((?:\\.|\S)+))""")
"""A word, perhaps opened by ``@``: a quoted path, or a run of non-spaces in which ``\\ `` is an escaped space."""
_TRAILING = ".,;:!?)]}>\"'"


@dataclass(frozen=True, slots=True)
class Mention:
    """A path the message names as an image: ``explicit`` when written ``@path``, else a pasted absolute path."""

    path: str
    explicit: bool

    @property
    def written(self) -> str:
        """As the user wrote it, for messages."""
        return f"@{self.path}" if self.explicit else self.path


@dataclass(frozen=True, slots=True)
class Attachments:
    """What :func:`attach_images` found.

    Attributes:
        images: the images to send with the message, in the order the message names them.
        left: pasted paths that were not attached, each with why (said to the user, never an error).
    """

    images: tuple[Image, ...] = ()
    left: tuple[str, ...] = ()


def image_mentions(prompt: str) -> list[Mention]:
    """The image paths ``prompt`` names: ``@`` words ending in an image suffix, and absolute paths that end in one."""
    found: list[Mention] = []
    for match in _WORD.finditer(prompt):
        at, double, single, bare = match.groups()
        path = double or single or re.sub(r"\\(.)", r"\1", (bare or "").rstrip(_TRAILING))
        if not path.lower().endswith(IMAGE_SUFFIXES):
            continue
        if not at and not path.startswith(("/", "~/")):
            continue  # a relative name without @ is a file to work on, not a picture to show
        mention = Mention(path, explicit=bool(at))
        if mention not in found:
            found.append(mention)
    return found


def attach_images(prompt: str, space: Workspace, *, reads_images: bool) -> Attachments:
    """The images ``prompt`` points at (see the module docstring); blocking: it reads files.

    Raises:
        UserError: an ``@`` mention names no file, a file outside the workspace by a relative path, or no image Cortana
            takes (too large, not PNG, JPEG, GIF or WebP), or one more than ``MAX_IMAGES`` (a pasted path past the
            bound is left, with a note).
    """
    images: dict[Path, Image] = {}
    left: list[str] = []
    for mention in image_mentions(prompt):
        if not mention.explicit and not reads_images:
            continue  # stays a path in the text, with nothing to say: the model reads no images
        try:
            found = _read(mention, space)
        except (UserError, ImageError) as error:
            if mention.explicit:
                raise UserError(f"{mention.written}: {error}; nothing was sent") from None
            left.append(f"{mention.written} was not attached: {error}")
            continue
        if found is None or found[0] in images:
            continue
        if len(images) == MAX_IMAGES:
            if mention.explicit:
                raise UserError(f"{mention.written}: at most {MAX_IMAGES} images go with one message; nothing was sent")
            left.append(f"{mention.written} was not attached: at most {MAX_IMAGES} images go with one message")
            continue
        images[found[0]] = found[1]
    return Attachments(tuple(images.values()), tuple(left))


def _read(mention: Mention, space: Workspace) -> tuple[Path, Image] | None:
    """The file ``mention`` names and its image; ``None`` for a pasted path that is no file (it stays text).

    Raises:
        UserError: an ``@`` mention of no file, or of one out of the workspace by a relative path.
        ImageError: the file is no image Cortana takes.
    """
    typed = Path(os.path.expanduser(mention.path))
    if typed.is_absolute() and not space.contains(typed.resolve()):
        target = typed.resolve()  # the user's own path, outside the workspace: theirs to name
        if target.is_file():
            return target, Image.from_path(target, name=typed.name)
        if mention.explicit:
            raise UserError(f"there is no file {typed}")
        return None
    try:  # the tools' resolver and opener: no .. or symlink out of the workspace, no link followed on the way
        target = space.resolve(mention.path)
        fd, _ = space.open_regular(target, space.relative(target))
    except ToolError as error:
        if mention.explicit:
            raise UserError(f"{error} (the workspace is {space.root})") from None
        return None
    with os.fdopen(fd, "rb") as handle:
        return target, Image.from_file(handle, target.name)

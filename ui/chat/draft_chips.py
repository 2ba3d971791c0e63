"""A tab's draft files and images in the form the history keeps them (issue #52), and back
into chips: the Workspace keeps them across a restart (app/workspace.py, the history's
draft_attachments), so the chips come back as they were and a send sends them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.attachments import Attachment
from app.attachments.stored import from_saved as file_from_saved
from app.attachments.stored import to_saved as file_saved
from app.images import ImageData
from app.images.stored import from_saved as image_from_saved
from app.images.stored import is_saved_image
from app.images.stored import to_saved as image_saved

if TYPE_CHECKING:
    from .chat_tab import ChatTab


def saved_draft_files(tab: ChatTab) -> list[dict[str, Any]]:
    """The files, then the images, read and given (a chip still reading or refused is not
    kept); an image under its chip's name ("photo.jpg", "pasted image")."""
    files = [file_saved(a) for a in tab.chips.attachments()]
    images = [image_saved(c.item) | {"name": c.name} for c in tab.image_chips.chips
              if isinstance(c.item, ImageData)]
    return files + images


def restore_draft_files(tab: ChatTab, saved: list[dict[str, Any]]) -> None:
    """Chips for a draft's saved files and images (one whose bytes do not match their hash
    is left out: a damaged row)."""
    images = [(str(s["name"]), image) for s in saved if is_saved_image(s)
              if (image := image_from_saved(s)) is not None]
    files = [item for s in saved if not is_saved_image(s)
             if isinstance(item := file_from_saved(s), Attachment)]
    tab.chips.add_items(files)
    tab.image_chips.add_images(images)

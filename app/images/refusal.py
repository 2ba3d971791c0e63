"""What the window says when images meet a model that reads text only (the API server's
400 says the same about the part it names: app/server/image_parts.py)."""

from __future__ import annotations

TEXT_ONLY = "reads text only: it cannot see images"


def images_refused(model: str, *, sent: bool = True) -> str:
    """The sentence shown at the input (`sent`: a message being sent, kept in the box)."""
    who = model or "This model"
    if sent:
        return (f"Not sent: {who} {TEXT_ONLY}. Remove the images, or pick a model that sees "
                "images (a vision model: docs/app.md, Images).")
    return (f"{who} {TEXT_ONLY}, and this chat has images. Pick a model that sees images, "
            "or start a new chat.")

"""What the window says when images meet a model that reads text only (the API server's
400 says the same about the part it names: app/server/image_parts.py)."""

from __future__ import annotations

TEXT_ONLY = "reads text only and cannot see images"


def images_refused(model: str, *, sent: bool = True) -> str:
    """The sentence shown at the input (`sent`: a message being sent, kept in the box;
    else a chat holding images sent on to such a model)."""
    who = f" ({model})" if model else ""
    if sent:
        return (f"Not sent: this model {TEXT_ONLY}{who}. Remove the images, or pick a vision "
                "model as the Backend.")
    return (f"This chat has images, and this model {TEXT_ONLY}{who}. Pick a vision model as "
            "the Backend, or start a new chat.")

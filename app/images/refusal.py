"""What the window says when images meet a model that reads text only (the API server's
400 says the same about the part it names: app/server/image_parts.py)."""

from __future__ import annotations

TEXT_ONLY = "reads text only and cannot see images"
# why (#52): the tool road renders its prompt in the app into token ids (app.tools'
# templates), and a vision model's image tokens are placed by its processor from the chat's
# messages (the API's 400 and a tab's notice both say it)
IMAGES_WITH_TOOLS = (
    "an image cannot be sent with tools to the local engine yet: a request that offers "
    "tools has its prompt rendered by the tool template into tokens, and the model's image "
    "processor places an image's tokens only in a chat of messages. Send the image without "
    "tools, or the tools without the image")


def images_refused(model: str, *, sent: bool = True, lead: str = "Not sent: ") -> str:
    """The sentence shown at the input: `sent`, the message being sent has images (it is
    kept in the box); else the chat's earlier messages have them. `lead` opens it (a
    reply's Refusal is worded 'Request refused: ' by the window instead)."""
    who = f" ({model})" if model else ""
    if sent:
        return (f"{lead}this model {TEXT_ONLY}{who}. Remove the images, or pick a vision "
                "model as the Backend.")
    return (f"{lead}this chat has images, and this model {TEXT_ONLY}{who}. Pick a vision "
            "model as the Backend, or start a new chat.")

"""Images in chats (issue #52), Qt-free: bytes checked and read into an ImageData (read.py),
carried as data URLs in OpenAI `image_url` content parts (url.py), shown as thumbnails
(thumbnail.py). The window, the API server, the history and the engine's input use it."""

from .image_data import ImageData, ImageRefused
from .read import MAX_BYTES, MAX_PIXELS, read_image
from .url import image_from_url, to_data_url

__all__ = ["ImageData", "ImageRefused", "read_image", "image_from_url", "to_data_url",
           "MAX_BYTES", "MAX_PIXELS"]

"""http(s) image URLs fetched, when the server is started with `--allow-image-urls` (#52),
or the window's *Fetch http(s) image URLs* setting is on (AppContext applies it).
Off by default: the server runs offline. When on, one GET with aiohttp's client: http and
https only, a time limit on the whole fetch, at most a few redirects, the body capped at the
data-URL image limit while it arrives (read.MAX_BYTES), then read by read.read_image, so a
non-image or truncated file is refused with the same reasons as a data URL.

The switch is process-wide: one `batchchat serve` process serves one set of options (the app
runs one server), and the images are read off the event loop (in a worker thread) where no
server object is at hand."""

from __future__ import annotations

import asyncio
import concurrent.futures

import aiohttp

from .image_data import ImageData, ImageRefused
from .read import MAX_BYTES, read_image

FETCH_TIMEOUT_S = 10.0  # the whole fetch: connect, redirects, body
MAX_REDIRECTS = 3
# both ways on: `batchchat serve`'s flag, the window's Server settings (app/settings.py)
ENABLE_HINT = ("start the server with --allow-image-urls (in the app: Server ▸ Server "
               "settings…) to fetch them")

_enabled = False


def allow_image_urls(enabled: bool) -> None:
    """Turn fetching http(s) image URLs on or off for this process."""
    global _enabled
    _enabled = bool(enabled)


def image_urls_allowed() -> bool:
    return _enabled


def fetch_image(url: str, timeout_s: float | None = None) -> ImageData:
    """The image at an http(s) URL; ImageRefused with the reason in words when it cannot be
    fetched (refused connection, an HTTP error status, a timeout, too large, too many
    redirects) or is not an image. Blocking: called off the event loop."""
    limit = FETCH_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a worker thread without a loop
        data = asyncio.run(_fetch(url, limit))
    else:  # called on a loop's thread: fetch on a thread of its own rather than nest loops
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            data = pool.submit(asyncio.run, _fetch(url, limit)).result()
    return read_image(data)


async def _fetch(url: str, limit: float) -> bytes:
    timeout = aiohttp.ClientTimeout(total=limit)
    try:
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session, \
                session.get(url, max_redirects=MAX_REDIRECTS) as resp:
            if resp.status != 200:
                raise ImageRefused(f"fetching it answered HTTP {resp.status} {resp.reason or ''}"
                                   .rstrip())
            if resp.content_length is not None and resp.content_length > MAX_BYTES:
                raise ImageRefused(_too_large(resp.content_length))
            data = bytearray()
            async for chunk in resp.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > MAX_BYTES:  # a body without (or lying about) its length
                    raise ImageRefused(_too_large(len(data), at_least=True))
            return bytes(data)
    except ImageRefused:
        raise
    except TimeoutError:
        raise ImageRefused(f"fetching it took longer than {limit:g} s") from None
    except aiohttp.TooManyRedirects:
        raise ImageRefused(f"fetching it was redirected more than {MAX_REDIRECTS} times"
                           ) from None
    except aiohttp.InvalidURL as exc:
        raise ImageRefused(f"not a URL that can be fetched ({exc})") from None
    except aiohttp.ClientConnectorError as exc:
        raise ImageRefused(f"could not connect to {exc.host}:{exc.port} "
                           f"({exc.os_error.strerror or exc.os_error})") from None
    except aiohttp.ClientPayloadError:
        raise ImageRefused("the connection closed before the whole image arrived") from None
    except aiohttp.ClientError as exc:
        raise ImageRefused(f"fetching it failed: {type(exc).__name__} {exc}".rstrip()
                           ) from None


def _too_large(size: int, at_least: bool = False) -> str:
    more = "over " if at_least else ""
    return (f"{more}{size / 1024 / 1024:.1f} MiB is over the "
            f"{MAX_BYTES // 1024 // 1024} MiB image limit")

"""One OpenAI-compatible endpoint: where it is, how to authenticate, which model, and how
long to wait. Validated when built; `to_dict()` leaves the API key out of exports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .errors import RemoteError, describe_exception, describe_status

REDACTED = "***"


class ConnectionConfigError(ValueError):
    """A connection setting is invalid; the message names it."""


@dataclass(frozen=True, slots=True)
class Connection:
    base_url: str  # e.g. http://127.0.0.1:8000 or http://host:8000/v1
    model: str = ""  # "" until picked from /v1/models
    api_key: str | None = None
    name: str = ""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0  # longest silence while waiting for the next bytes

    def __post_init__(self) -> None:
        url = self.base_url.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ConnectionConfigError(
                f"The server URL must start with http:// or https://, got {self.base_url!r}")
        if not parts.hostname:
            raise ConnectionConfigError(f"The server URL has no host: {self.base_url!r}")
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise ConnectionConfigError(f"Bad port in {self.base_url!r}") from None
        for name in ("connect_timeout_s", "read_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConnectionConfigError(f"{name} must be a number above 0, got {value!r}")
        object.__setattr__(self, "base_url", url)
        object.__setattr__(self, "api_key", self.api_key or None)
        if not self.name:
            object.__setattr__(self, "name", parts.netloc)

    @property
    def api_root(self) -> str:
        """The URL that /chat/completions and /models hang off (…/v1)."""
        return self.base_url if self.base_url.endswith("/v1") else f"{self.base_url}/v1"

    def url(self, path: str) -> str:
        return f"{self.api_root}/{path.lstrip('/')}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def timeout(self) -> aiohttp.ClientTimeout:
        # No total limit (a long reply may stream for minutes); a connect limit, and an idle
        # limit on every socket read, so a silent server never hangs a request.
        return aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s,
                                     sock_read=self.read_timeout_s)

    async def list_models(self, session: aiohttp.ClientSession | None = None) -> list[str]:
        """GET /v1/models: the ids the server offers (RemoteError with the reason if not)."""
        return await list_models(self, session)

    def with_model(self, model: str) -> Connection:
        return replace(self, model=model)

    def describe(self) -> str:
        return f"{self.name} ({self.model})" if self.model else self.name

    def to_dict(self, redact_key: bool = True) -> dict[str, Any]:
        """For settings and exports: the key becomes a marker unless redact_key is False."""
        data = asdict(self)
        if redact_key and data["api_key"]:
            data["api_key"] = REDACTED
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Connection:
        """The inverse of to_dict; a redacted key reads back as no key."""
        known = {"base_url", "model", "api_key", "name", "connect_timeout_s", "read_timeout_s"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConnectionConfigError(f"Unknown connection field(s): {', '.join(unknown)}")
        values = dict(data)
        if values.get("api_key") == REDACTED:
            values["api_key"] = None
        return cls(**values)


async def list_models(conn: Connection, session: aiohttp.ClientSession | None = None
                      ) -> list[str]:
    """The model ids the server offers (GET /v1/models); RemoteError with the reason if not."""
    own = session is None
    session = session or aiohttp.ClientSession()
    try:
        async with session.get(conn.url("models"), headers=conn.headers(),
                               timeout=conn.timeout()) as resp:
            if resp.status != 200:
                raise RemoteError(describe_status(conn, resp.status, await resp.text(),
                                                  resp.headers))
            try:
                data = await resp.json(content_type=None)
                return [str(m["id"]) for m in data["data"]]
            except (ValueError, KeyError, TypeError):
                raise RemoteError(f"{conn.name}: /v1/models did not answer with a model "
                                  "list") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise RemoteError(describe_exception(conn, exc)) from None
    finally:
        if own:
            await session.close()

"""Can the server listen where it was asked to? Checked before a model spends its load time.

`serve --host 999.1.1.1` used to load the model and then fail with the resolver's words,
"[Errno -2] Name or service not known", naming no host (issue #46)."""

from __future__ import annotations

import errno
import socket


def check_bindable(host: str, port: int) -> None:
    """ValueError, in one line naming the address, unless `host:port` can be bound now."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"cannot listen on {host!r}: not an IP address or a name this "
                         f"machine can resolve ({why})") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = f"port {port} is in use (another server?); pick another with --port"
            elif exc.errno == errno.EADDRNOTAVAIL:
                why = "no network interface of this machine has that address"
            else:
                why = exc.strerror or str(exc)
            raise ValueError(f"cannot listen on {host}:{port}: {why}") from None

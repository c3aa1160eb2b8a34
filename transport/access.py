"""Access checks of a request that would open a session: the host name asked for, the token, the origin.

Bound to loopback, only a loopback name at the server's port (or the front door's, ``--public-url``)
is served, and only the server's own pages' origins (DNS rebinding: a web page whose name is made
to resolve to 127.0.0.1 reaches this server from the person's browser). Off loopback, a token is
required (``ServerConfig.check``), compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Access:
    """Who may open a session here: the name a request asks for (``Host``), its token and its ``Origin``.

    The server's capacity (full, draining) is the server's own check; this is the same for every
    path that opens a session (a WebSocket's handshake, WebRTC's offer).
    """

    def __init__(
        self,
        host: str,
        token: str | None,
        allow_origins: tuple[str, ...],
        public_url: str | None,
        port: Callable[[], int],
    ) -> None:
        """``host``: the address bound; ``port``: the port served (known once the server listens)."""
        self.host = host
        self.token = token
        self.allow_origins = allow_origins
        self._public = urlsplit(public_url) if public_url else None
        self._port = port

    @staticmethod
    def one_header(request: Request, name: str) -> str | None:
        """The header's value; None when it is missing or repeated (which no honest client sends)."""
        values = request.headers.get_all(name)
        return values[0] if len(values) == 1 else None

    def host_allowed(self, host: str) -> bool:
        """Bound to loopback, only a loopback name at this port may be asked for,
        or the front door's (``public_url``).

        DNS rebinding: a web page whose own name is made to resolve to
        127.0.0.1 reaches this server from the person's browser, with its own
        name in ``Host`` (and in ``Origin``). Off loopback the token guards.
        """
        if not is_loopback(self.host):
            return True
        if self._public is not None and host.lower() == self._public.netloc.lower():
            return True
        try:
            parts = urlsplit("//" + host)
            name, port = parts.hostname, parts.port or 80
        except ValueError:
            return False
        return name is not None and is_loopback(name) and port == self._port()

    def refusal(self, connection: ServerConnection, request: Request, query: str, host: str) -> Response | None:
        """The answer refusing a request without a valid token, or from an origin not allowed; None: let in."""
        if self.token and not self._token_given(request, query, self.token):
            return connection.respond(401, "a valid token is required (Authorization: Bearer, or ?token=)\n")
        origins = request.headers.get_all("Origin")
        if len(origins) > 1 or (origins and not self._origin_allowed(origins[0], host)):
            return connection.respond(403, "this origin is not allowed\n")
        return None

    @classmethod
    def _token_given(cls, request: Request, query: str, token: str) -> bool:
        given = parse_qs(query).get("token", [""])[0]
        if not given and request.headers.get_all("Authorization"):
            auth = cls.one_header(request, "Authorization")
            if auth is None or not auth.lower().startswith("bearer "):
                return False
            given = auth[7:].strip()
        try:
            return hmac.compare_digest(given.encode(), token.encode())
        except UnicodeEncodeError:  # a header that is not text: not our token
            return False

    def _origin_allowed(self, origin: str, host: str) -> bool:
        """The server's own pages, and ``--allow-origin`` ones.

        Bound to loopback, the own origin is a loopback name at the server's
        port (never what the request's ``Host`` says: a rebinding page sets
        both). Off loopback, where a token is required, it is the page served
        under the name the client asked for.
        """
        if origin in self.allow_origins:
            return True
        public = self._public
        if public is not None and origin.lower() == f"{public.scheme}://{public.netloc}".lower():
            return True
        try:
            parts = urlsplit(origin)
            name, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or name is None:
            return False
        if is_loopback(self.host):
            return is_loopback(name) and port == self._port()
        return parts.netloc == host

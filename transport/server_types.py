"""The server's configuration, what it is given, and what its parts see of it.

:class:`Server` is what a connection (``transport/connection.py``) and the routes
(``transport/routes.py``) use of ``transport/ws_server.VoiceServer``: they are
given the server, and never import its module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from core.call import CallConfig
from core.events import Event
from core.flow import Flow
from shell.config import SessionConfig
from shell.engines import Engines
from shell.tools import Tools
from transport.access import Access, is_loopback
from transport.protocol import Limits


@dataclass(frozen=True)
class ServedAgent:
    """An agent a session may choose by name (``--agent NAME=FILE``): its flow and its tools."""

    flow: Flow
    tools: Tools | None


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8765  # 0: any free port (see VoiceServer.port)
    token: str | None = None  # required on connect when set; must be set off loopback
    allow_origins: tuple[str, ...] = ()  # browser origins besides the server's own
    max_sessions: int = 8
    # Where clients reach this worker when it stands behind a front door (a reverse proxy): its
    # host[:port] is the name they ask for and its page's origin. None: the worker's own address.
    public_url: str | None = None
    limits: Limits = field(default_factory=Limits)
    session: SessionConfig = field(default_factory=SessionConfig)
    tools: Tools | None = None  # what the model may call in every session (--tools)
    # The agents a session may choose by name (hello's "agent", Twilio's <Parameter name="agent">,
    # Realtime's ?agent=): the first --agent is also the default, session.flow with tools above.
    agents: Mapping[str, ServedAgent] = field(default_factory=dict)
    call: CallConfig = field(default_factory=CallConfig)  # how phone calls are held (/telephony/twilio)
    ice_servers: tuple[str, ...] = ()  # WebRTC: STUN/TURN URLs (none: host candidates only, a LAN)
    record_dir: Path | None = None  # --record: each conversation as a stereo WAV here (shell/recording.py)

    def check(self) -> None:
        if self.public_url is not None:
            parts = urlsplit(self.public_url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                raise ValueError(f"--public-url {self.public_url!r}: give http(s)://host[:port] of the front door")
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"binding to {self.host} exposes the assistant to the network: "
                "give a token (--token or VOICE_TOKEN) that clients must send"
            )


EventHook = Callable[[str, Event], None]  # (session id, pipeline event), for logs and tests


class SessionObserver(Protocol):
    """Watches every session (the app's metrics); keyed by the connection, whose id changes on resume."""

    def session_opened(self, key: object) -> None: ...

    def observe(self, event: Event, key: object) -> None: ...

    def session_closed(self, key: object) -> None: ...


class ConversationOpener(Protocol):
    """The resume policy (``voice/app/conversations.py``): which conversation a session goes on with."""

    def open(
        self, resume: str | None, system_prompt: str | None = None, owner: str | None = None, in_use: Any = ()
    ) -> Any: ...


class Server(Protocol):
    """What a connection and the routes use of the server (``transport/ws_server.VoiceServer``)."""

    engines: Engines
    config: ServerConfig
    conversations: ConversationOpener | None
    metrics: SessionObserver | None
    on_event: EventHook | None
    connections: dict[str, Any]  # session id -> its Connection
    draining: bool
    access: Access

    def check_access(
        self, connection: ServerConnection, request: Request, query: str, host: str
    ) -> Response | None: ...

    def open_peer_session(self, conn: Any) -> None: ...

    def rekey(self, conn: Any, session_id: str) -> None: ...

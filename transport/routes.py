"""Routing: which dialect a path speaks, and WebRTC's offer, which opens a session over a peer.

``/ws`` is our protocol, ``/v1/realtime`` OpenAI Realtime's, ``/telephony/twilio``
Twilio Media Streams'; ``POST /webrtc/offer`` answers a browser's SDP offer and
runs our protocol on its data channel, with the audio as RTP
(``transport/webrtc.py``). Any other GET path is a static file or ``/health``
(``transport/static.py``).
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from transport.connection import Connection
from transport.dialect import Dialect
from transport.protocol import (
    VoiceProtocol,
)
from transport.server_types import Server
from transport.static import response

SESSION_PATHS = ("/ws", "/v1/realtime", "/telephony/twilio")  # a WebSocket that opens a session


def dialect_for(server: Server, request_path: str, session_id: str) -> Dialect:
    """The dialect of a WebSocket opened at ``request_path`` (``/ws``'s for any other path)."""
    url = urlsplit(request_path)
    rate, limits = server.engines.output_rate, server.config.limits
    if url.path == "/v1/realtime":
        from transport.realtime import RealtimeProtocol

        query = parse_qs(url.query)
        resume = query.get("session", [None])[0]
        semantic = server.config.session.end_of_turn is not None
        denoise = server.config.session.denoise != "off"
        agent = query.get("agent", [None])[0]  # ?agent=NAME: the session starts with the URL
        return RealtimeProtocol(session_id, rate, limits, resume, semantic, denoise, agent)
    if url.path == "/telephony/twilio":
        from transport.twilio import TwilioProtocol

        return TwilioProtocol(session_id, rate, limits)
    return VoiceProtocol(session_id, rate, limits)


async def answer_offer(
    server: Server, connection: ServerConnection, target: str, headers: Headers, body: bytes
) -> Response:
    """A POST request: WebRTC's offer at ``/webrtc/offer`` (transport/webrtc.py), under the
    same access rules as a WebSocket; the answer starts the client's session."""
    from transport.webrtc import OfferError, WebRTCPeer, read_offer

    request = Request(target, headers)
    url = urlsplit(target)
    host = server.access.one_header(request, "Host")
    if host is None or not server.access.host_allowed(host):
        return connection.respond(403, "this host name is not served here\n")
    if url.path != "/webrtc/offer":
        return connection.respond(404, "not found (POST is for /webrtc/offer)\n")
    refused = server.check_access(connection, request, url.query, host)
    if refused is not None:
        return refused
    kind = server.access.one_header(request, "Content-Type") or ""
    try:
        sdp = read_offer(kind, body)
    except OfferError as e:
        return connection.respond(400, f"{e}\n")
    peer = WebRTCPeer(server.engines.output_rate, server.config.ice_servers)
    try:
        answer = await peer.answer(sdp)
    except Exception as e:  # aiortc's word on an offer it cannot take (no codec in common, bad SDP)
        await peer.close()
        return connection.respond(400, f"the offer could not be answered: {str(e)[:200]}\n")
    if server.draining or len(server.connections) >= server.config.max_sessions:  # filled up meanwhile
        await peer.close()
        return connection.respond(503, "the server is at its limit of sessions\n")
    session_id = uuid.uuid4().hex
    dialect = VoiceProtocol(session_id, server.engines.output_rate, server.config.limits)
    server.open_peer_session(Connection(server, peer.link, session_id, dialect, peer=peer))
    if kind.split(";")[0].strip().lower() == "application/sdp":
        return response(201, "Created", "application/sdp", answer.encode(), "no-store")
    body = json.dumps({"type": "answer", "sdp": answer}).encode()
    return response(200, "OK", "application/json", body, "no-store")

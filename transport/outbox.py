"""What waits to be written to one client, in order, and the cut-off of a client that does not read.

One writer per connection: events and audio frames keep their order on the
wire. A client that reads needs little room (reply audio is paced to its
playback); one that does not is closed with 1008 as soon as more than
``Limits.max_outbox_bytes`` wait for it, or when the oldest message has waited
``Limits.slow_client_s`` (the connection's watchdog asks :meth:`Outbox.stalled`).
Then nothing more is queued: the server holds no more than that for it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from transport.protocol import Limits

CLOSE_GRACE_S = 1.0  # a client closed for not reading has this long to answer the close frame


class Outbox:
    """One client's queue of messages to send, with its byte count and its cut-off."""

    def __init__(
        self,
        ws: Any,
        limits: Limits,
        last_words: Callable[[str], list[str | bytes]],
        closing: Callable[[], None],
    ) -> None:
        """``ws``: the client's WebSocket (or a WebRTC data channel); ``last_words(why)``: the
        dialect's fatal ``slow_client`` error as messages; ``closing()``: the session is ending."""
        self.ws = ws
        self.limits = limits
        self._last_words = last_words
        self._closing = closing
        self.messages: deque[tuple[float, str | bytes, int]] = deque()  # (when queued, message, its bytes)
        self.queued_bytes = 0  # in the outbox, the message being written included (Limits.max_outbox_bytes)
        self._ready = asyncio.Event()
        self.cut_off = False  # closed for not reading what it was sent
        self.hanging_up: asyncio.Task | None = None

    def put(self, message: str | bytes) -> None:
        """Queue ``message``; a client this puts over the cap is cut off (one message may always wait)."""
        if self.cut_off:
            return  # closed for not reading: nothing more is queued
        size = len(message) if isinstance(message, bytes) or message.isascii() else len(message.encode())
        self.messages.append((time.monotonic(), message, size))
        self.queued_bytes += size
        self._ready.set()
        cap = self.limits.max_outbox_bytes
        if self.queued_bytes > cap and len(self.messages) > 1:  # one message, however large, may always wait
            self.cut_off_now(f"the client does not read: over {cap} bytes wait to be sent to it")

    def stalled(self, now: float) -> bool:
        """The oldest message has waited longer than ``Limits.slow_client_s``."""
        return bool(self.messages) and now - self.messages[0][0] > self.limits.slow_client_s

    def clear(self) -> None:
        self.messages.clear()
        self.queued_bytes = 0

    async def run(self) -> None:
        """One writer, in order: events and audio frames keep their order on the wire."""
        while True:
            while not self.messages:
                self._ready.clear()
                await self._ready.wait()
            _, message, size = self.messages[0]  # stays counted while the socket takes it
            await self.ws.send(message)
            if self.messages:  # (emptied if the client was cut off meanwhile)
                self.messages.popleft()
                self.queued_bytes -= size

    def cut_off_now(self, why: str) -> None:
        """Close a client that does not read what it is sent (1008), now, and queue nothing more for it.

        What waits in the outbox is dropped. The fatal ``slow_client`` error is
        written to the socket behind the message being written and then the
        close frame, without waiting for the client to read them; if it does
        not answer the close within a second, the TCP connection is dropped.
        """
        if self.cut_off:
            return
        self.cut_off = True
        self.clear()
        last = self._last_words(why)
        # Not one of the connection's tasks, which end with the session: the close goes on after it.
        self.hanging_up = asyncio.create_task(self._hang_up(last, 1008, "slow_client"))

    async def _hang_up(self, last: list[str | bytes], code: int, reason: str) -> None:
        # Each send writes its frame to the transport at its first step, then waits for the client (not awaited).
        writes = [asyncio.ensure_future(self.ws.send(m)) for m in last]
        try:
            await asyncio.sleep(0)  # the writes go first: the close frame comes after them
            self._closing()  # the session ends, and the close frame is written in this same step
            async with asyncio.timeout(CLOSE_GRACE_S):
                await self.ws.close(code, reason)
        except TimeoutError:
            self.ws.transport.abort()
        finally:
            for w in writes:
                w.cancel()
            await asyncio.gather(*writes, return_exceptions=True)

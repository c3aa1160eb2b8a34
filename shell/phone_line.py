"""The line: what is said without being asked, and when the conversation is over.

A phone call's greeting (said at the first block, before the caller speaks),
the watch on a line gone quiet (a prompt, then a goodbye), the timers a tool
set (:meth:`PhoneLine.say_later`), the keys pressed on the caller's keypad
(one turn per entry, core/keypad.py), and the end a tool or the quiet line asked
for: :attr:`PhoneLine.ended` is set once the goodbye has been played whole. A
goodbye the person spoke over keeps the line up (:meth:`PhoneLine.reply_cut`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from core.call import CallConfig, IdleAction, IdleWatch
from core.commands import Command
from core.keypad import Keypad, keyed_turn
from core.playout import Playout
from core.turns import Conversation
from shell.clock import Clock

log = logging.getLogger("voice.session")


class CallControl(Protocol):
    """What the telephone provider does with a live call (``transport/twilio_calls.py``)."""

    async def transfer(self, to: str) -> str | None:
        """Put the call through to ``to`` (a number or a SIP address): None once done, else why not."""
        ...


# Said when the provider refuses a transfer: the caller is still on the line with us.
TRANSFER_FAILED = "I'm sorry, I couldn't put you through just now. Is there anything else I can help with?"


class PhoneLine:
    """Greeting, idle watch, timers, the keypad and the end of one conversation."""

    def __init__(
        self,
        call: CallConfig | None,
        clock: Clock,
        conversation: Conversation,
        playout: Playout,
        run: Callable[[list[Command]], None],
        busy: Callable[[], bool],
        calls: CallControl | None = None,
        spawn: Callable[[Coroutine[Any, Any, None]], object] | None = None,
    ) -> None:
        """``run``: carries out the core's commands; ``busy``: work, audio or tools are in flight
        (the line is not quiet then); ``calls``: the provider's control of a phone call, which a
        transfer goes through (None: a transfer only ends the conversation, and the client acts on
        its ``transfer`` event); ``spawn``: runs the transfer's request beside the session."""
        self.clock = clock
        self.conversation = conversation
        self._playout = playout
        self._run = run
        self._busy = busy
        self._alarms: list[tuple[float, str]] = []  # (due on the session's clock, what to say)
        self._ending = False  # a tool ended the conversation: over once the reply has been played
        self._ending_on: int | None = None  # the reply (the goodbye) whose hearing ends it; None: any
        self._transfer: str | None = None  # where the call is put through once it ends
        self._calls, self._spawn = calls, spawn
        self._greeting = call.greeting if call is not None else None  # said at the first block, then None
        self._opening_step = False  # the agent's start step opens the conversation at the first block
        self._idle_watch = IdleWatch(call.idle) if call is not None and call.idle is not None else None
        self.ended = asyncio.Event()
        self._keypad = Keypad()

    def greet(self, text: str) -> None:
        """Say ``text`` at the first block, before the person speaks (an agent's first step), in place
        of a call's greeting."""
        self._greeting = text

    def open_step(self) -> None:
        """At the first block, the agent's start step opens the conversation: its ``on_enter`` hook,
        then its words (in place of a call's greeting)."""
        self._opening_step, self._greeting = True, None

    def due(self, now: float) -> None:
        """Once a block, before the core's own tick: a call's greeting and its quiet line, timers due."""
        if self._greeting:  # the assistant speaks first, without waiting for the caller
            self._run(self.conversation.announce(self._greeting, now))
            self._greeting = None
        elif self._opening_step:
            self._opening_step = False
            self._run(self.conversation.open_step(now))
        if self._idle_watch is not None:
            self._watch_the_line(now)
        while self._alarms and self._alarms[0][0] <= now:
            _, text = self._alarms.pop(0)
            self._run(self.conversation.announce(text, now))
        keyed = self._keypad.due(now)
        if keyed is not None:
            self._keyed(keyed, now)

    def key_pressed(self, key: str, now: float) -> None:
        """A key of the phone's keypad (DTMF): the keys make one turn at ``#`` or after a pause."""
        keyed = self._keypad.pressed(key, now)
        if keyed is not None:
            self._keyed(keyed, now)

    def _keyed(self, keys: str, now: float) -> None:
        log.info("the caller keyed %s", keys)
        self._run(self.conversation.user_text(keyed_turn(keys), now))

    def _watch_the_line(self, now: float) -> None:
        watch = self._idle_watch
        assert watch is not None
        action = watch.check(now, self._busy(), self.conversation.user_speaking)
        if action is IdleAction.PROMPT:
            self._run(self.conversation.announce(watch.policy.prompt, now))
        elif action is IdleAction.HANG_UP:
            log.info("the line has been quiet after %d prompts: saying goodbye", watch.prompted)
            self._run(self.conversation.announce(watch.policy.goodbye, now))

    def check_ended(self) -> None:
        """Set :attr:`ended` if the conversation was to end and nothing is left to say or hear."""
        c = self.conversation
        hung_up = self._idle_watch is not None and self._idle_watch.hanging_up
        if (self._ending or hung_up) and c.response is None and not self._playout.queued and not c.user_speaking:
            if self._transfer is not None and self._calls is not None and self._spawn is not None:
                to, self._transfer, self._ending = self._transfer, None, False
                self._spawn(self._put_through(self._calls, to))
            else:
                self.ended.set()

    async def _put_through(self, calls: CallControl, to: str) -> None:
        """The handover was heard: the provider puts the call through, and the conversation is over;
        where it refuses, the caller hears so and the conversation goes on."""
        refused = await calls.transfer(to)
        if refused is None:
            log.info("the call was put through to %s", to)
            self.ended.set()
            return
        log.error("the call could not be put through to %s: %s", to, refused)
        self._run(self.conversation.announce(TRANSFER_FAILED, self.clock.now()))

    def say_later(self, delay_s: float, text: str) -> None:
        """Say ``text`` ``delay_s`` seconds from now on the session's clock (a timer going off)."""
        self._alarms.append((self.clock.now() + delay_s, text))
        self._alarms.sort(key=lambda a: a[0])

    def end_after_reply(self, response: int | None = None, transfer: str | None = None) -> None:
        """End the conversation once reply ``response`` (None: the one in flight) has been played:
        :attr:`ended` is set then (with ``transfer``, once the call was put through there)."""
        r = self.conversation.response
        self._ending, self._transfer = True, transfer
        self._ending_on = response if response is not None else (r.id if r is not None else None)

    def reply_cut(self, response: int) -> None:
        """Reply ``response`` was cut before it was heard whole: if it was the goodbye, the person
        spoke over it ("wait, one more thing"), and the call stays up to hear them."""
        if self._ending and self._ending_on in (None, response):
            log.info("the person spoke over the goodbye (reply %d): the conversation goes on", response)
            self._ending, self._ending_on, self._transfer = False, None, None

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
from collections.abc import Callable

from core.call import CallConfig, IdleAction, IdleWatch
from core.commands import Command
from core.keypad import Keypad, keyed_turn
from core.playout import Playout
from core.turns import Conversation
from shell.clock import Clock

log = logging.getLogger("voice.session")


class PhoneLine:
    """Greeting, idle watch, timers and the end of one conversation."""

    def __init__(
        self,
        call: CallConfig | None,
        clock: Clock,
        conversation: Conversation,
        playout: Playout,
        run: Callable[[list[Command]], None],
        busy: Callable[[], bool],
    ) -> None:
        """``run``: carries out the core's commands; ``busy``: work, audio or tools are in flight
        (the line is not quiet then)."""
        self.clock = clock
        self.conversation = conversation
        self._playout = playout
        self._run = run
        self._busy = busy
        self._alarms: list[tuple[float, str]] = []  # (due on the session's clock, what to say)
        self._ending = False  # a tool ended the conversation: over once the reply has been played
        self._ending_on: int | None = None  # the reply (the goodbye) whose hearing ends it; None: any
        self._greeting = call.greeting if call is not None else None  # said at the first block, then None
        self._idle_watch = IdleWatch(call.idle) if call is not None and call.idle is not None else None
        self.ended = asyncio.Event()
        self._keypad = Keypad()

    def greet(self, text: str) -> None:
        """Say ``text`` at the first block, before the person speaks (an agent's first step), in place
        of a call's greeting."""
        self._greeting = text

    def due(self, now: float) -> None:
        """Once a block, before the core's own tick: a call's greeting and its quiet line, timers due."""
        if self._greeting:  # the assistant speaks first, without waiting for the caller
            self._run(self.conversation.announce(self._greeting, now))
            self._greeting = None
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
            self.ended.set()

    def say_later(self, delay_s: float, text: str) -> None:
        """Say ``text`` ``delay_s`` seconds from now on the session's clock (a timer going off)."""
        self._alarms.append((self.clock.now() + delay_s, text))
        self._alarms.sort(key=lambda a: a[0])

    def end_after_reply(self, response: int | None = None) -> None:
        """End the conversation once reply ``response`` (None: the one in flight) has been played:
        :attr:`ended` is set then."""
        r = self.conversation.response
        self._ending = True
        self._ending_on = response if response is not None else (r.id if r is not None else None)

    def reply_cut(self, response: int) -> None:
        """Reply ``response`` was cut before it was heard whole: if it was the goodbye, the person
        spoke over it ("wait, one more thing"), and the call stays up to hear them."""
        if self._ending and self._ending_on in (None, response):
            log.info("the person spoke over the goodbye (reply %d): the conversation goes on", response)
            self._ending, self._ending_on = False, None

"""Hold: a sound played while a reply waits on its tools (an agent's ``hold:``, core/flow.py).

Once the reply's tools have kept it quiet for the filler's delay (at once after the filler, if one
was said), the agent's hold sound plays, a piece of :data:`HOLD_PIECE_S` at a time, each asked for
when less than half a piece is left to play, until the answer's words are on their way: the
answer waits behind at most one piece. A piece goes into the reply's ledger without words, so what the
person heard of the reply, and what is stored, are its words alone; a barge-in cuts it with the
reply. The sound itself is the shell's (shell/hold_sounds.py).
"""

from __future__ import annotations

from core.commands import Command, PlayHoldSound
from core.reply import Reply

HOLD_PIECE_S = 0.3


def hold_due(r: Reply, t: float, delay_s: float, rate: int) -> list[Command]:
    """The next piece of the hold sound for reply ``r`` at ``t`` ([]: none is due)."""
    tool = r.tool
    if not r.waiting_on_tools():  # nobody waits, or words are on their way
        tool.hold_sound_on = False
        return []
    if not tool.hold_sound_on:
        quiet = r.quiet_on_tools_s(t)
        if quiet is None or (quiet < delay_s - 1e-9 and not tool.filler_said):
            return []
        tool.hold_sound_on = True
    n = round(HOLD_PIECE_S * rate)
    if r.ledger.queued - r.ledger.played >= n // 2:  # half a piece ahead at least: no gap, little to wait behind
        return []
    r.ledger.add_chunk("", n, [])
    return [PlayHoldSound(r.id, n)]

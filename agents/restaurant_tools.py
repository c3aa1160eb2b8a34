"""Luigi's tools (agents/restaurant.yaml): a table booked, confirmed with a reference, kept nowhere.

The booking's details are the fields the flow collected (``context.state``), so the model only has
to call the tool, not to copy four values into it. The reference comes from the details (a hash),
so the same booking always gets the same one: a scenario or a test can expect it.
"""

from __future__ import annotations

import hashlib
import re

from voice.tools import ToolContext, tool

__all__ = ["book_table"]

DETAILS = ("name", "party_size", "date", "time")


@tool(cancel_on_barge_in=False)  # a booking finishes even when the caller speaks over it
def book_table(context: ToolContext) -> str:
    """Book the table the caller asked for (its name, party size, date and time as collected). Returns its reference."""
    state = context.state
    missing = [k for k in DETAILS if state.get(k) in (None, "")]
    if missing:
        return f"Not booked: the {', '.join(missing)} is still missing."
    name, party_size, date, time = (state[k] for k in DETAILS)
    time = re.sub(r"(?i)^at\s+", "", str(time))  # kept as said ("at 8"): said once below
    key = "|".join(str(v).strip().lower() for v in (name, party_size, date, time))
    reference = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 9000 + 1000
    people = "1 person" if party_size == 1 else f"{party_size}"
    return f"Booked: a table for {people} under {name} on {date} at {time}, reference LU-{reference}."

"""Parcel & Co's tools (agents/support.yaml): an order looked up by the number the flow collected.

The orders are a small table here, as an example; a real line would ask its shop's database or
API. The order number is the field the flow collected (``context.state``), so the model does not
have to copy it into the call.
"""

from __future__ import annotations

from voice.tools import ToolContext, tool

__all__ = ["look_up_order"]

ORDERS = {
    "4512": "shipped on Monday and arrives tomorrow before noon",
    "1007": "is being packed and ships today",
    "3019": "was delivered on Friday to your front door",
}


@tool
def look_up_order(context: ToolContext) -> str:
    """Look up the caller's order by the order number collected. Returns what became of it."""
    order = str(context.state.get("order") or "").strip()
    if not order:
        return "I don't have the order number yet."
    if order not in ORDERS:
        return f"I can't find an order {' '.join(order)}. Please check the number on your confirmation email."
    return f"Order {' '.join(order)} {ORDERS[order]}."

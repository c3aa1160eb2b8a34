"""A Twilio call put through to a person: the live call updated with TwiML ``<Dial>`` by Twilio's REST API.

An agent's ``transfer`` step on a phone call (``/telephony/twilio``) ends our part of the call once
the handover was heard; then the call's TwiML is replaced with a ``<Dial>`` to the number or SIP
address (`Calls` resource, ``POST /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json`` with
``Twiml``), and Twilio leaves the stream for the dial. The credentials come from the environment:
``TWILIO_ACCOUNT_SID`` and ``TWILIO_AUTH_TOKEN`` (``TWILIO_API_URL`` points elsewhere, for a
test's stand-in). A refusal (no credentials, an error status, no answer in time) is returned as
text: the caller is told, and the conversation goes on (shell/phone_line.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

import httpx

API_URL = "https://api.twilio.com"
TIMEOUT_S = 10.0


def dial_twiml(to: str) -> str:
    """The TwiML that puts the call through to ``to``: a phone number, or a ``sip:`` address."""
    target = f"<Sip>{escape(to)}</Sip>" if to.lower().startswith("sip:") else f"<Number>{escape(to)}</Number>"
    return f"<Response><Dial>{target}</Dial></Response>"


@dataclass(frozen=True)
class TwilioCall:
    """One live call, as its ``start`` message named it: what a transfer updates."""

    call_sid: str
    account_sid: str

    @classmethod
    def of(cls, meta: dict[str, Any] | None) -> TwilioCall | None:
        """The call a Twilio session's metadata names (None: not a Twilio call)."""
        if not meta or meta.get("channel") != "twilio":
            return None
        return cls(str(meta.get("call_sid") or ""), str(meta.get("account_sid") or ""))

    async def transfer(self, to: str) -> str | None:
        """Update the live call to dial ``to``: None once Twilio took it, else why not."""
        sid, token = os.environ.get("TWILIO_ACCOUNT_SID"), os.environ.get("TWILIO_AUTH_TOKEN")
        if not sid or not token:
            return "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are not set: no call can be transferred"
        if not self.call_sid:
            return "the call's start message named no call (callSid)"
        base = os.environ.get("TWILIO_API_URL", API_URL).rstrip("/")
        url = f"{base}/2010-04-01/Accounts/{self.account_sid or sid}/Calls/{self.call_sid}.json"
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
                answer = await client.post(url, data={"Twiml": dial_twiml(to)}, auth=(sid, token))
        except httpx.HTTPError as e:
            return f"Twilio did not answer: {type(e).__name__}"
        if answer.status_code >= 300:
            return f"Twilio refused it: HTTP {answer.status_code} {answer.text[:200]}"
        return None

"""Realtime, server to client: the pipeline's events as the Realtime events its client is sent
(the ids of items and responses, and what each response said), without I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.events import (
    AsrFinal,
    AsrPartial,
    AwaitingTools,
    BargeIn,
    Error,
    Event,
    ResponseContinued,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    ToolCallEnd,
    ToolCallStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from transport.protocol import (
    Send,
    failure_text,
)


@dataclass
class _Reply:
    """One reply under the ids its client knows, and what the client was told of it."""

    id: str  # resp_...
    item_id: str  # item_a...
    transcript: str = ""  # the chunks' texts sent so far
    cancel_reason: str = "turn_detected"  # response.done's status_details, should it be cut
    by_truncate: bool = False  # cut by the client's own conversation.item.truncate
    calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # its function_call items
    mcp_calls: dict[str, tuple[dict[str, Any], int]] = dataclasses.field(default_factory=dict)  # call id -> item, index
    done: bool = False  # response.done sent: it ended with calls, the reply goes on in another


class ServerEvents:
    """The half of :class:`~transport.realtime.RealtimeProtocol` that tells the client of the pipeline's events."""

    # The connection's state and helpers, kept by RealtimeProtocol.
    session_id: str
    tools: list[dict[str, Any]]
    _responses: dict[int, _Reply]
    _user_items: dict[int, str]
    _last_item: str | None
    _stable: str
    _event: Callable[..., Send]
    error: Callable[..., list[Send]]

    @staticmethod
    def _where(r: _Reply) -> dict[str, Any]:
        return {"response_id": r.id, "item_id": r.item_id, "output_index": 0, "content_index": 0}

    def event(self, event: Event) -> list[Send]:
        """A pipeline event as the Realtime events the client is sent (none for the server's own)."""
        handler = EVENT_HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def _on_error(self, e: Error) -> list[Send]:
        return self.error("pipeline", failure_text(e.where))

    def _on_speech_start(self, e: SpeechStart) -> list[Send]:
        item = f"item_u{e.utterance}_{self.session_id[:8]}"
        self._user_items[e.utterance] = item
        self._stable = ""
        return [self._event("input_audio_buffer.speech_started", audio_start_ms=round(e.onset * 1000), item_id=item)]

    def _on_speech_end(self, e: SpeechEnd) -> list[Send]:
        item = self._user_items.get(e.utterance)
        previous, self._last_item = self._last_item, item
        user_item = {
            "id": item,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        return [
            self._event("input_audio_buffer.speech_stopped", audio_end_ms=round(e.end * 1000), item_id=item),
            self._event("input_audio_buffer.committed", item_id=item, previous_item_id=previous),
            self._event("conversation.item.added", previous_item_id=previous, item=user_item),
        ]

    def _on_asr_partial(self, e: AsrPartial) -> list[Send]:
        stable = e.stable
        item = self._user_items.get(max(self._user_items, default=0))
        if not stable.startswith(self._stable) or stable == self._stable or item is None:
            return []
        delta, self._stable = stable[len(self._stable) :], stable
        return [
            self._event("conversation.item.input_audio_transcription.delta", item_id=item, content_index=0, delta=delta)
        ]

    def _on_asr_final(self, e: AsrFinal) -> list[Send]:
        item = self._user_items.get(e.utterance)
        if item is None:
            return []
        return [
            self._event(
                "conversation.item.input_audio_transcription.completed",
                item_id=item,
                content_index=0,
                transcript=e.text,
            )
        ]

    def _on_response_start(self, e: ResponseStart) -> list[Send]:
        return self._open(e.response, str(e.response))

    def _open(self, n: int, name: str) -> list[Send]:
        """A Realtime response, and its assistant message, for (this part of) reply ``n``."""
        r = _Reply(f"resp_{name}_{self.session_id[:8]}", f"item_a{name}_{self.session_id[:8]}")
        self._responses[n] = r
        while len(self._responses) > 16:
            self._responses.pop(next(iter(self._responses)))
        previous, self._last_item = self._last_item, r.item_id
        item = {"id": r.item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": "in_progress", "content": []}  # fmt: skip
        response = {"id": r.id, "object": "realtime.response", "status": "in_progress", "output": []}
        return [
            self._event("response.created", response=response),
            self._event("response.output_item.added", response_id=r.id, output_index=0, item=item),
            self._event("conversation.item.added", previous_item_id=previous, item=item),
            self._event("response.content_part.added", **self._where(r), part={"type": "audio", "transcript": ""}),
        ]

    def _on_tool_call(self, e: ToolCallStart) -> list[Send]:
        """A call of one of the client's tools, or an MCP server's (the server's own it does not see)."""
        r = self._responses.get(e.response)
        if r is not None and e.server and e.name not in {t.get("name") for t in self.tools}:
            return self._mcp_call(r, e)
        if r is None or e.name not in {t.get("name") for t in self.tools}:
            return []
        index = 1 + len(r.calls)  # the reply's message is output 0
        item_id = f"item_f{e.response}_{index}_{self.session_id[:8]}"
        item = {"id": item_id, "object": "realtime.item", "type": "function_call", "status": "in_progress",
                "call_id": e.call_id, "name": e.name, "arguments": ""}  # fmt: skip
        done = {**item, "status": "completed", "arguments": e.arguments}
        r.calls.append(done)
        where = {"response_id": r.id, "item_id": item_id, "output_index": index, "call_id": e.call_id}
        previous, self._last_item = self._last_item, item_id
        return [
            self._event("response.output_item.added", response_id=r.id, output_index=index, item=item),
            self._event("conversation.item.added", previous_item_id=previous, item=item),
            self._event("response.function_call_arguments.delta", **where, delta=e.arguments),
            self._event("response.function_call_arguments.done", **where, name=e.name, arguments=e.arguments),
            self._event("response.output_item.done", response_id=r.id, output_index=index, item=done),
            self._event("conversation.item.done", previous_item_id=previous, item=done),
        ]

    def _mcp_call(self, r: _Reply, e: ToolCallStart) -> list[Send]:
        """An MCP server's tool, called by the server: Realtime's ``mcp_call`` item, its label the server's name."""
        index = 1 + len(r.calls) + len(r.mcp_calls)
        item = {"id": f"item_m{e.response}_{index}_{self.session_id[:8]}", "object": "realtime.item",
                "type": "mcp_call", "server_label": e.server, "name": e.name, "arguments": e.arguments,
                "output": None, "error": None}  # fmt: skip
        r.mcp_calls[e.call_id] = (item, index)
        where = {"response_id": r.id, "item_id": item["id"], "output_index": index}
        return [
            self._event("response.output_item.added", response_id=r.id, output_index=index, item=item),
            self._event("response.mcp_call_arguments.done", **where, arguments=e.arguments),
            self._event("response.mcp_call.in_progress", item_id=item["id"], output_index=index),
        ]

    def _on_tool_result(self, e: ToolCallEnd) -> list[Send]:
        """An MCP call's result: completed (its output) or failed (why)."""
        r = self._responses.get(e.response)
        if r is None or e.call_id not in r.mcp_calls:
            return []
        item, index = r.mcp_calls.pop(e.call_id)
        ok = e.status == "ok"
        done = {
            **item,
            "output": e.result if ok else None,
            "error": None if ok else {"type": e.status, "message": e.result},
        }
        return [
            self._event(f"response.mcp_call.{'completed' if ok else 'failed'}", item_id=item["id"], output_index=index),
            self._event("response.output_item.done", response_id=r.id, output_index=index, item=done),
        ]

    def _on_awaiting_tools(self, e: AwaitingTools) -> list[Send]:
        """The request ended with calls: if the client has some to run, this response is done."""
        r = self._responses.get(e.response)
        if r is None or not r.calls or r.done:
            return []
        r.done = True
        return self._finish(r, r.transcript, interrupted=False)

    def _on_response_continued(self, e: ResponseContinued) -> list[Send]:
        """The reply goes on with the results: in a new response, if the last one was done."""
        r = self._responses.get(e.response)
        if r is None or not r.done:
            return []
        return self._open(e.response, f"{e.response}r{e.round}")

    def _on_tts_chunk(self, e: TtsChunk) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None:
            return []
        delta = (" " if r.transcript else "") + e.text
        r.transcript += delta
        return [self._event("response.output_audio_transcript.delta", **self._where(r), delta=delta)]

    def _on_barge_in(self, e: BargeIn) -> list[Send]:
        r = self._responses.get(e.response)
        if r is not None:
            r.cancel_reason = "client_cancelled" if e.reason in ("client", "truncate") else "turn_detected"
            r.by_truncate = e.reason == "truncate"
        return []

    def _on_truncate(self, e: Truncate) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None or r.by_truncate:
            return []  # the client's own truncate: answered by truncated()
        return [
            self._event("conversation.item.truncated", item_id=r.item_id, content_index=0, audio_end_ms=e.audio_end_ms)
        ]

    def _on_turn_end(self, e: TurnEnd) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None or r.done:
            return []
        # A reply that went on after its calls: this response has the words said since.
        transcript = r.transcript if r.id != f"resp_{e.response}_{self.session_id[:8]}" else e.text
        return self._finish(r, transcript, e.interrupted)

    def _finish(self, r: _Reply, transcript: str, interrupted: bool) -> list[Send]:
        part = {"type": "audio", "transcript": transcript}
        status = "incomplete" if interrupted else "completed"
        item = {"id": r.item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": status, "content": [{"type": "output_audio", "transcript": transcript}]}  # fmt: skip
        response: dict[str, Any] = {
            "id": r.id,
            "object": "realtime.response",
            "status": "cancelled" if interrupted else "completed",
            "output": [item, *r.calls],
        }
        if interrupted:
            response["status_details"] = {"type": "cancelled", "reason": r.cancel_reason}
        return [
            self._event("response.output_audio.done", **self._where(r)),
            self._event("response.output_audio_transcript.done", **self._where(r), transcript=transcript),
            self._event("response.content_part.done", **self._where(r), part=part),
            self._event("response.output_item.done", response_id=r.id, output_index=0, item=item),
            self._event("conversation.item.done", item=item),
            self._event("response.done", response=response),
        ]


# The pipeline events this dialect tells its client of; the others are the server's own.
EVENT_HANDLERS: dict[type[Event], Callable[[ServerEvents, Any], list[Send]]] = {
    Error: ServerEvents._on_error,
    SpeechStart: ServerEvents._on_speech_start,
    SpeechEnd: ServerEvents._on_speech_end,
    AsrPartial: ServerEvents._on_asr_partial,
    AsrFinal: ServerEvents._on_asr_final,
    ResponseStart: ServerEvents._on_response_start,
    TtsChunk: ServerEvents._on_tts_chunk,
    ToolCallStart: ServerEvents._on_tool_call,
    ToolCallEnd: ServerEvents._on_tool_result,
    AwaitingTools: ServerEvents._on_awaiting_tools,
    ResponseContinued: ServerEvents._on_response_continued,
    BargeIn: ServerEvents._on_barge_in,
    Truncate: ServerEvents._on_truncate,
    TurnEnd: ServerEvents._on_turn_end,
}

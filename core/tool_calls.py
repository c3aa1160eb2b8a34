"""Tool calls as the LLM streams them: pieced together per call, released only when whole (pure).

A partial JSON string is not a smaller version of the final object: ``{"minutes": 1``
may yet become ``{"minutes": 15}``. So a call's pieces are kept apart, by the index
the stream gives each call (OpenAI's ``delta.tool_calls[i].index``, as vLLM's tool
parsers give it too), and a call leaves :class:`ToolCallStream` only once it is
complete:

* another call starts (a higher index: calls are streamed one after another), or
* the stream ends (``finish_reason`` is ``"tool_calls"``, or the generation ended).

Whether the finished text parses and fits the tool's schema is the caller's to
check (``shell/tools``): this only says when it is finished. After
:meth:`ToolCallStream.discard` (the person spoke over the reply, the generation
was cancelled) nothing is released any more, whatever arrives late.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of call ``index``: its first piece carries the call's ``id`` and ``name``
    (an id may never come: some servers send none); every piece may carry a fragment of
    its ``arguments``' JSON text."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ToolCall:
    """A whole call: ``arguments`` is all the JSON text the model wrote for it."""

    index: int
    id: str
    name: str
    arguments: str


class ToolCallStreamError(ValueError):
    """The stream broke the order calls come in (a piece of a call already complete)."""


@dataclass
class _Building:
    index: int
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def call(self, id_prefix: str) -> ToolCall:
        return ToolCall(self.index, self.id or f"{id_prefix}{self.index}", self.name, "".join(self.arguments))


class ToolCallStream:
    def __init__(self, id_prefix: str = "call_") -> None:
        """``id_prefix``: a call the stream gives no id is named by it and its index."""
        self.id_prefix = id_prefix
        self._building: _Building | None = None
        self._completed = -1  # every call up to this index has been released
        self.discarded = False

    def feed(self, delta: ToolCallDelta) -> list[ToolCall]:
        """The next piece; returns the call it shows to be complete (the one before it), if any."""
        if self.discarded:
            return []
        if delta.index <= self._completed:
            raise ToolCallStreamError(f"a piece of tool call {delta.index} after it was complete")
        out: list[ToolCall] = []
        current = self._building
        if current is None or delta.index != current.index:
            if current is not None:
                if delta.index < current.index:
                    raise ToolCallStreamError(f"tool call {delta.index} resumed after call {current.index} began")
                out.append(self._release())
            current = self._building = _Building(delta.index)
        if delta.id and current.id is None:
            current.id = delta.id
        if delta.name:
            current.name += delta.name  # a name is whole in practice, but the format lets it be split
        if delta.arguments:
            current.arguments.append(delta.arguments)
        return out

    def finish(self) -> list[ToolCall]:
        """The stream ended: the call still open, if any, is complete."""
        if self.discarded or self._building is None:
            return []
        return [self._release()]

    def discard(self) -> ToolCall | None:
        """Nothing more is released; returns the call that was still streaming (never to run)."""
        open_call = self._building.call(self.id_prefix) if self._building is not None else None
        self._building = None
        self.discarded = True
        return open_call

    @property
    def streaming(self) -> bool:
        """A call has begun and is not complete yet."""
        return self._building is not None and not self.discarded

    def _release(self) -> ToolCall:
        assert self._building is not None
        call = self._building.call(self.id_prefix)
        self._completed = call.index
        self._building = None
        return call

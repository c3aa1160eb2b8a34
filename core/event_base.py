"""The base of every event (:mod:`core.events`): its timestamp, its one serializer, and the
field helpers that say how a field is rounded and when it is left out of the JSON."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar


def rounded(digits: int) -> Any:
    """A number kept (and logged) to ``digits`` decimals."""
    return field(metadata={"digits": digits})


def optional(default: Any = None, digits: int | None = None) -> Any:
    """A field left out of the JSON while it holds ``default``."""
    return field(default=default, metadata={"optional": True, "digits": digits})


@dataclass(frozen=True)
class Event:
    """Something that happened at ``t``, seconds on the session's timeline."""

    type: ClassVar[str] = ""
    t: float = rounded(4)

    def __post_init__(self) -> None:
        for name, digits, _ in _layout(type(self)):
            value = getattr(self, name)
            if digits is not None and value is not None:
                object.__setattr__(self, name, round(value, digits))

    def to_json(self) -> dict[str, Any]:
        """The event as its JSON object: ``t``, ``type``, then the fields."""
        out: dict[str, Any] = {"t": self.t, "type": self.type}
        for name, _, omit in _layout(type(self))[1:]:
            value = getattr(self, name)
            if omit is MISSING or value != omit:
                out[name] = value
        return out


_LAYOUTS: dict[type[Event], tuple[tuple[str, int | None, Any], ...]] = {}


def _layout(cls: type[Event]) -> tuple[tuple[str, int | None, Any], ...]:
    """Each field's name, its decimals (None: as it is) and the value it is left out at (MISSING: never)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = _LAYOUTS[cls] = tuple(
            (f.name, f.metadata.get("digits"), f.default if f.metadata.get("optional") else MISSING)
            for f in fields(cls)
        )
    return layout

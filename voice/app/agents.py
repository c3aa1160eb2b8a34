"""Which agents a run holds: ``--agent FILE`` and, on a server, ``--agent NAME=FILE`` repeated.

The first one given is the default, the agent of every session that names none; on a server each
session may choose another by its name (our ``hello``, Realtime's ``?agent=``, a Twilio
``<Parameter name="agent">``), never by a path a client sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NAMED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]{0,63})=(.+)$")


@dataclass(frozen=True)
class AgentOption:
    """One ``--agent``: the name sessions choose it by (a file's own stem where none is given), and its file."""

    name: str
    path: str


class AgentOptionError(ValueError):
    """``--agent`` values that cannot be told apart."""


def agent_options(values: list[str]) -> list[AgentOption]:
    """``--agent``'s values in the order given; raises :class:`AgentOptionError` for a name twice."""
    out: list[AgentOption] = []
    for value in values:
        named = NAMED.match(value)
        if named and not Path(value).exists():  # a file named "a=b.yaml" is still a file
            option = AgentOption(named.group(1), named.group(2))
        else:
            option = AgentOption(Path(value).stem, value)
        if any(o.name == option.name for o in out):
            raise AgentOptionError(f"two agents are named {option.name!r}: name them apart (--agent NAME=FILE)")
        out.append(option)
    return out

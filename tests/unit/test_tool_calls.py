"""Streamed tool calls pieced together and released only when whole (``core/tool_calls.py``).

The property: for any split of a stream of calls into pieces, no call is released
before its last piece has arrived, every released call's arguments are exactly the
final ones, each call is released once, and after a discard nothing is.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.tool_calls import ToolCall, ToolCallDelta, ToolCallStream, ToolCallStreamError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
calls = st.lists(
    st.tuples(
        st.sampled_from(["get_time", "set_timer", "calculate", "end_conversation"]),
        st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4),
        st.booleans(),  # whether the stream gives the call an id
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def streams(draw):
    """Calls, and their pieces as a stream would cut them: the first piece of each call
    carries its id and name, the JSON text is cut anywhere (inside strings, numbers, escapes)."""
    wanted = draw(calls)
    pieces: list[tuple[ToolCallDelta, int]] = []  # (piece, index of the call it is the last piece of, or -1)
    finals: list[ToolCall] = []
    for index, (name, args, has_id) in enumerate(wanted):
        text = json.dumps(args)
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=6)))
        fragments = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        call_id = f"call_{draw(st.text('abcdef0123456789', min_size=4, max_size=8))}" if has_id else None
        for k, fragment in enumerate(fragments):
            first = k == 0
            delta = ToolCallDelta(index, call_id if first else None, name if first else None, fragment)
            pieces.append((delta, index if k == len(fragments) - 1 else -1))
        finals.append(ToolCall(index, call_id or f"call_{index}", name, text))
    return pieces, finals


@settings(max_examples=300, deadline=None)
@given(streams())
def test_no_call_leaves_before_it_is_whole_and_its_arguments_are_the_final_ones(stream):
    pieces, finals = stream
    calls = ToolCallStream()
    released: list[ToolCall] = []
    last_piece_seen: set[int] = set()
    for delta, last_of in pieces:
        out = calls.feed(delta)
        if last_of >= 0:
            last_piece_seen.add(last_of)
        for call in out:
            assert call.index in last_piece_seen  # never before its last piece
            assert call == finals[call.index]  # exactly the final arguments, id and name
        released += out
    released += calls.finish()
    assert released == finals  # each call once, in order
    assert all(isinstance(json.loads(c.arguments), dict) for c in released)


@settings(max_examples=200, deadline=None)
@given(streams(), st.data())
def test_after_a_discard_nothing_is_released(stream, data):
    pieces, finals = stream
    cut = data.draw(st.integers(0, len(pieces)))
    calls = ToolCallStream()
    released = [c for delta, _ in pieces[:cut] for c in calls.feed(delta)]
    open_call = calls.discard()
    late = [c for delta, _ in pieces[cut:] for c in calls.feed(delta)] + calls.finish()
    assert late == [] and not calls.streaming
    # Released before the discard: only calls that were whole (a later one had begun).
    assert released == finals[: len(released)]
    if open_call is not None:
        assert open_call.index == len(released)  # the one streaming when the person spoke: never released


def test_a_call_is_whole_when_the_next_begins_or_the_stream_ends():
    calls = ToolCallStream()
    assert calls.feed(ToolCallDelta(0, "call_a", "set_timer", '{"minu')) == []
    assert calls.streaming
    assert calls.feed(ToolCallDelta(0, arguments='tes": 1')) == []
    assert calls.feed(ToolCallDelta(0, arguments="5}")) == []  # still open: more may come
    (first,) = calls.feed(ToolCallDelta(1, "call_b", "get_time", "{}"))
    assert first == ToolCall(0, "call_a", "set_timer", '{"minutes": 15}')
    assert calls.finish() == [ToolCall(1, "call_b", "get_time", "{}")]
    assert calls.finish() == []


def test_a_call_without_an_id_gets_one_from_its_index():
    calls = ToolCallStream()
    calls.feed(ToolCallDelta(0, name="get_time"))
    assert calls.finish() == [ToolCall(0, "call_0", "get_time", "")]


def test_a_stream_out_of_order_is_an_error():
    calls = ToolCallStream()
    calls.feed(ToolCallDelta(0, "a", "get_time", "{}"))
    calls.feed(ToolCallDelta(1, "b", "get_time", "{}"))
    with pytest.raises(ToolCallStreamError):
        calls.feed(ToolCallDelta(0, arguments=" "))

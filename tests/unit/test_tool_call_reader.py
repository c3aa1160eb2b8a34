"""The embedded engine's reading of a reply through a vLLM tool parser (``llm/tool_call_reader.py``,
``ToolCallReader``): what the parser is given (a leading code fence read past, doubled braces
made single), and what is
flushed at the end. The parser here is a stand-in that records its input; the real parser on
the real model is in ``tests/integration/test_llm_tools.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.tool_calls import ToolCallDelta
from llm.base import Delta
from llm.tool_call_reader import ToolCallReader, as_written


@dataclass
class Said:
    content: str | None = None
    tool_calls: list = field(default_factory=list)


class StandInParser:
    """Stands in for a vLLM tool parser: records the text it is given, passes it on as content,
    and holds back ``held`` as arguments of call 0 not yet given out."""

    def __init__(self, held: str = "") -> None:
        self.seen: list[tuple[str, str]] = []  # (current text, delta)
        self.prev_tool_call_arr = [{"name": "set_timer"}] if held else []
        self.streamed_args_for_tool = ['{"minutes": 10'] if held else []
        self._held = held

    def extract_tool_calls_streaming(self, previous, current, delta, previous_ids, current_ids, delta_ids, request):
        assert current == previous + delta and current_ids[: len(previous_ids)] == list(previous_ids)
        self.seen.append((current, delta))
        return Said(content=delta)

    def get_remaining_unstreamed_args(self) -> str:
        return self._held


def read(pieces: list[str], parser: StandInParser) -> list[Delta | ToolCallDelta]:
    reader = ToolCallReader(parser, request=None)
    out: list[Delta | ToolCallDelta] = []
    for i, piece in enumerate(pieces):
        out += reader.read(piece, [i])
    return out


def test_a_reply_without_a_fence_is_given_as_it_comes():
    parser = StandInParser()
    out = read(["Sure", "! Here", " is one."], parser)
    assert [c for c, _ in parser.seen] == ["Sure", "Sure! Here", "Sure! Here is one."]
    assert "".join(out) == "Sure! Here is one."


def test_a_leading_code_fence_is_read_past_whole_lines_only():
    parser = StandInParser()
    read(["``", "`js", "on\n", '{"name"', ': "calculate"}', "\n```"], parser)
    assert parser.seen[0][0] == '{"name"'  # nothing until the fence's line ended, then not that line
    # Nor the closing fence: the backticks that may begin it are held back, then it is cut off.
    assert parser.seen[-1][0] == '{"name": "calculate"}\n'


def test_what_follows_the_closing_fence_is_not_read():
    parser = StandInParser()
    read(["```json\n{\n", '  "name": "set_timer"\n}', "\n`", "``", "\nDone."], parser)
    assert parser.seen[-1][0] == '{\n  "name": "set_timer"\n}\n'


def test_a_backtick_that_opens_no_fence_is_text():
    parser = StandInParser()
    assert "".join(read(["`ls` lists", " files."], parser)) == "`ls` lists files."


def test_what_the_parser_held_back_is_flushed_unless_the_reply_was_cut_off():
    reader = ToolCallReader(StandInParser(held=', "label": ""}'), request=None)
    assert reader.finish(truncated=False) == [ToolCallDelta(0, arguments=', "label": ""}')]
    reader = ToolCallReader(StandInParser(held=', "label": ""}'), request=None)
    assert reader.finish(truncated=True) == []  # its lenient reading of a cut call is not passed on


def test_a_call_with_its_braces_doubled_is_read_as_one_object():
    # Qwen2.5-Coder-1.5B, "What is 17 times 23?" and "Goodbye, thanks for your help.", as streamed.
    parser = StandInParser()
    read(["{{", '"name": "calculate", ', '"arguments": {"expression": "17 * 23"}', "}}}"], parser)
    assert parser.seen[-1][0] == '{"name": "calculate", "arguments": {"expression": "17 * 23"}}'
    assert as_written('{{"name": "end_conversation", "arguments": {}}}}') == (
        '{"name": "end_conversation", "arguments": {}}'
    )


def test_braces_inside_strings_do_not_close_the_object():
    assert as_written('{{"name": "say", "arguments": {"text": "a } and a \\" {"}}}') == (
        '{"name": "say", "arguments": {"text": "a } and a \\" {"}}'
    )


def test_one_opening_brace_waits_for_the_next_and_a_single_one_is_left_as_it_is():
    assert as_written("{") is None
    assert as_written('{"name": "x"') == '{"name": "x"'
    assert as_written("Sure {ok}") == "Sure {ok}"
    assert as_written('```json\n{{"name": "x", "arguments": {}}}}\n```') == '{"name": "x", "arguments": {}}'

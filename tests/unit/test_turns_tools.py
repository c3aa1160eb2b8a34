"""Tool calls in the turn-taking core, driven by scripted events (no engines, no audio)."""

from __future__ import annotations

from core.budget import Budget
from core.commands import (
    CancelResponse,
    CommitSpeculation,
    DiscardSpeculation,
    Emit,
    RunTool,
    StartResponse,
    StopTools,
    Synthesize,
    TranscribeFinal,
)
from core.events import LlmDone, ToolCallEnd, ToolCallStart, TurnEnd
from core.history import History, ToolUse, Turn
from core.ledger import Word
from core.tool_calls import ToolCall, ToolCallDelta
from core.turns import Conversation

TOOLS = [{"type": "function", "function": {"name": "get_current_time", "description": "now", "parameters": {}}}]
RATE = 24000


def of(kind, commands):
    return [c for c in commands if isinstance(c, kind)]


def events(kind, commands):
    return [c.event for c in commands if isinstance(c, Emit) and isinstance(c.event, kind)]


def ask(conv: Conversation, text="what time is it") -> StartResponse:
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    (start,) = of(StartResponse, conv.transcript_final(tf.utterance, text, tf.onset, tf.end, 1.6))
    return start


def speak(conv: Conversation, cmds, t: float) -> list:
    """Synthesize each chunk asked for (a second per word) and play it all; the commands that gives."""
    out = []
    for s in of(Synthesize, cmds):
        words = s.text.split()
        n = RATE * len(words)
        out += conv.tts_audio(
            s.response, s.chunk, s.text, n, [Word(w, (i + 1) * RATE) for i, w in enumerate(words)], t, True
        )
        out += conv.tts_done(s.response, s.chunk, t)
        out += conv.played(n, t)
    return out


def call_pieces(index: int, name: str, arguments: str, size: int = 3) -> list[ToolCallDelta]:
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
    return [ToolCallDelta(index, id=f"id{index}", name=name, arguments=parts[0])] + [
        ToolCallDelta(index, arguments=p) for p in parts[1:]
    ]


def test_a_call_runs_once_whole_and_the_reply_goes_on_with_its_result():
    conv = Conversation("be brief", tools=TOOLS, max_tool_rounds=2)
    start = ask(conv)
    assert start.tools == TOOLS and start.round == 0
    r = start.response
    said = conv.llm_delta(r, "Let me check.", 1.7)
    runs = []
    for piece in call_pieces(0, "get_current_time", '{"zone": "UTC"}'):
        runs += of(RunTool, conv.llm_tool_call(r, piece, 1.8))
    assert runs == []  # the arguments may still change: nothing runs on a piece
    done = conv.llm_done(r, 1.9)
    (run,) = of(RunTool, done)
    assert run.call == ToolCall(0, "id0", "get_current_time", '{"zone": "UTC"}')
    assert [s.text for s in of(Synthesize, said + done)] == ["Let me check."]  # spoken while the tool runs
    assert not events(LlmDone, done)  # the reply is not over: it waits for the result
    finished = conv.tool_finished(r, run.call, "ok", "It is 10:15.", 0.2, 2.1)
    (ended,) = events(ToolCallEnd, finished)
    assert (ended.status, ended.result) == ("ok", "It is 10:15.")
    (again,) = of(StartResponse, finished)
    assert (again.response, again.round, again.tools) == (r, 1, TOOLS)
    assert again.messages[-2] == {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "id0", "type": "function", "function": {"name": "get_current_time", "arguments": '{"zone": "UTC"}'}}
        ],
    }
    assert again.messages[-1] == {
        "role": "tool",
        "tool_call_id": "id0",
        "name": "get_current_time",
        "content": "It is 10:15.",
    }
    cmds = conv.llm_delta(r, "It is a quarter past ten.", 2.3) + conv.llm_done(r, 2.4)
    cmds = speak(conv, said + done, 2.5) + speak(conv, cmds, 2.6)
    (end,) = events(TurnEnd, cmds)
    assert end.text == "Let me check. It is a quarter past ten."
    assert [t.role for t in conv.history.turns] == ["user", "tool", "assistant"]
    messages = conv.history.messages(None)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"] == "id0"


def test_several_calls_in_one_reply_each_runs_when_the_next_begins():
    conv = Conversation(tools=TOOLS)
    r = ask(conv).response
    first = of(RunTool, conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.7))
    assert first == []
    (run_a,) = of(RunTool, conv.llm_tool_call(r, ToolCallDelta(1, "b", "get_current_time", "{"), 1.8))
    assert run_a.call.id == "a"
    conv.llm_tool_call(r, ToolCallDelta(1, arguments="}"), 1.8)
    (run_b,) = of(RunTool, conv.llm_done(r, 1.9))
    assert run_b.call.id == "b"
    assert not of(StartResponse, conv.tool_finished(r, run_b.call, "ok", "two", 0.1, 2.0))  # waits for a
    (again,) = of(StartResponse, conv.tool_finished(r, run_a.call, "error", "a failed", 0.2, 2.1))
    assert [m.get("tool_call_id") for m in again.messages[-2:]] == ["a", "b"]  # in the order they were made


def test_calls_without_ids_get_ids_unique_to_the_reply_and_round():
    conv = Conversation(tools=TOOLS, max_tool_rounds=2)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, name="get_current_time"), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    assert of(StartResponse, conv.tool_finished(r, run.call, "ok", "10:15", 0.1, 1.9))
    conv.llm_tool_call(r, ToolCallDelta(0, name="get_current_time"), 2.0)
    (run2,) = of(RunTool, conv.llm_done(r, 2.1))
    assert run.call.id != run2.call.id


def test_a_barge_in_while_a_call_streams_leaves_it_unrun_and_the_history_valid():
    conv = Conversation(tools=TOOLS)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", '{"zo'), 1.7)
    conv.speech_onset(1.8, 1.8)
    conv.speech_started(1.8, 2.0)
    (check,) = [c for c in conv.speech_continues(2.5)]
    cut = conv.interruption_checked(check.utterance, "stop right there", 2.6)
    assert of(CancelResponse, cut) and not of(StopTools, cut)  # nothing was running
    late = conv.llm_tool_call(r, ToolCallDelta(0, arguments='ne": "UTC"}'), 2.7) + conv.llm_done(r, 2.8)
    assert not of(RunTool, late) and not events(ToolCallStart, late)
    assert all(t.role != "tool" for t in conv.history.turns)
    assert [m["role"] for m in conv.history.messages(None)] == ["user"]


def test_a_barge_in_while_a_tool_runs_stops_it_and_its_result_is_still_kept():
    conv = Conversation(tools=TOOLS)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    conv.speech_started(2.0, 2.2)
    (check,) = conv.speech_continues(2.7)
    cut = conv.interruption_checked(check.utterance, "never mind that", 2.8)
    assert of(StopTools, cut) == [StopTools(r)]
    # The tool kept running by its policy finishes after the cut: kept, and no new request.
    after = conv.tool_finished(r, run.call, "ok", "It is 10:15.", 1.2, 3.0)
    assert not of(StartResponse, after) and events(ToolCallEnd, after)
    tool = [t for t in conv.history.turns if t.role == "tool"]
    assert tool and tool[0].tool == ToolUse("a", "get_current_time", "{}", "ok", 1.2)
    roles = [m["role"] for m in conv.history.messages(None)]
    assert roles == ["user", "assistant", "tool"]  # the call, with its result


def test_a_filler_is_said_once_when_tools_keep_the_reply_quiet():
    conv = Conversation(tools=TOOLS, filler="One moment.", filler_delay_s=1.0)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    assert conv.tick(2.5) == []
    (filler,) = of(Synthesize, conv.tick(2.8))
    assert filler.text == "One moment."
    speak(conv, [filler], 2.9)
    assert conv.tick(5.0) == [] and conv.tick(9.0) == []  # once a reply
    conv.tool_finished(r, run.call, "ok", "10:15", 3.0, 9.1)


def test_no_filler_while_the_reply_is_still_speaking():
    conv = Conversation(tools=TOOLS, filler_delay_s=1.0)
    r = ask(conv).response
    said = conv.llm_delta(r, "Let me look that up for you right now.", 1.7)
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.8)
    done = conv.llm_done(r, 1.8)
    (chunk,) = of(Synthesize, said + done)
    assert conv.tick(3.0) == []  # synthesized, not played yet: something is being said
    speak(conv, [chunk], 3.0)  # nine words: played until 12.0
    assert conv.tick(12.5) == []
    assert of(Synthesize, conv.tick(13.1))


def test_a_call_in_a_round_asked_without_tools_is_not_run():
    conv = Conversation(tools=TOOLS)  # one round with tools, the default
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    (again,) = of(StartResponse, conv.tool_finished(r, run.call, "ok", "10:15", 0.1, 1.9))
    assert again.tools is None
    late = conv.llm_tool_call(r, ToolCallDelta(0, "b", "get_current_time", "{}"), 2.0) + conv.llm_done(r, 2.1)
    assert not of(RunTool, late) and events(LlmDone, late)


def test_past_the_last_round_the_model_is_asked_without_tools():
    conv = Conversation(tools=TOOLS, max_tool_rounds=2)
    r = ask(conv).response
    rounds = []
    for i in range(2):
        conv.llm_tool_call(r, ToolCallDelta(0, f"c{i}", "get_current_time", "{}"), 2.0 + i)
        (run,) = of(RunTool, conv.llm_done(r, 2.1 + i))
        (again,) = of(StartResponse, conv.tool_finished(r, run.call, "ok", "10:15", 0.1, 2.2 + i))
        rounds.append(again)
    assert [a.tools for a in rounds] == [TOOLS, None]


def test_a_speculative_reply_runs_no_tool_before_its_commit():
    budget = Budget(1)
    conv = Conversation(tools=TOOLS, speculation=budget)
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.13, 1.13))
    (spec,) = of(StartResponse, conv.early_transcript(early.utterance, 1.0, "what time is it", 1.2))
    assert spec.speculative and spec.tools == TOOLS
    conv.llm_tool_call(spec.response, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.3)
    assert not of(RunTool, conv.llm_done(spec.response, 1.4))
    committed = conv.speech_ended(1.0, 1.5)  # on the transcript it was started on
    assert of(CommitSpeculation, committed)
    (run,) = of(RunTool, committed)
    assert of(StartResponse, conv.tool_finished(spec.response, run.call, "ok", "10:15", 0.1, 1.8))


def test_a_discarded_speculative_reply_never_runs_its_calls():
    conv = Conversation(tools=TOOLS, speculation=Budget(1))
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.13, 1.13))
    (spec,) = of(StartResponse, conv.early_transcript(early.utterance, 1.0, "what time is it", 1.2))
    conv.llm_tool_call(spec.response, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.3)
    conv.llm_done(spec.response, 1.4)
    discarded = conv.speech_continues(1.5)  # the person goes on: not the turn
    assert of(DiscardSpeculation, discarded) and not of(RunTool, discarded)


def test_an_announcement_waits_for_the_floor_and_is_a_reply():
    conv = Conversation(tools=TOOLS)
    r = ask(conv).response
    assert conv.announce("Your tea timer is done.", 1.7) == []  # a reply is in flight
    speak(conv, conv.llm_delta(r, "Hi.", 1.8) + conv.llm_done(r, 1.9), 2.0)
    assert conv.response is None
    cmds = conv.tick(3.5)
    (s,) = of(Synthesize, cmds)
    assert s.text == "Your tea timer is done."
    (end,) = events(TurnEnd, speak(conv, cmds, 3.6))
    assert end.text == "Your tea timer is done."


def test_the_history_keeps_a_call_with_its_result_and_drops_neither_from_the_front():
    from llm.context import fit_to_context

    h = History()
    h.add(Turn("user", "what time is it"))
    h.add(Turn("tool", "10:15", response=1, tool=ToolUse("a", "get_current_time", "{}", "ok")))
    h.add(Turn("assistant", "It is 10:15.", response=1))
    h.add(Turn("user", "thanks"))
    messages = h.messages("sys")
    fitted = fit_to_context(messages, lambda m: 10 * len(m), 30)
    assert fitted[1]["role"] != "tool"
    assert [m["role"] for m in fitted] == ["system", "assistant", "user"]


def test_the_filler_covers_the_wait_for_the_answer_after_a_quick_tool():
    conv = Conversation(tools=TOOLS, filler_delay_s=1.0)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "get_current_time", "{}"), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    assert of(StartResponse, conv.tool_finished(r, run.call, "ok", "10:15", 0.01, 1.81))
    (filler,) = of(Synthesize, conv.tick(2.9))  # the model, asked again, has said nothing yet
    assert filler.text == "One moment."
    conv.llm_delta(r, "It is", 3.5)
    assert conv.tick(9.0) == []


def test_an_answer_with_no_words_says_the_result_instead():
    conv = Conversation(tools=TOOLS)
    r = ask(conv).response
    conv.llm_tool_call(r, ToolCallDelta(0, "a", "calculate", '{"expression": "12 * 7"}'), 1.7)
    (run,) = of(RunTool, conv.llm_done(r, 1.8))
    conv.tool_finished(r, run.call, "ok", "84", 0.01, 1.81)
    said = conv.llm_delta(r, '{"response_type": "text"}', 2.0) + conv.llm_done(r, 2.1)
    assert [s.text for s in of(Synthesize, said)] == ["84"]

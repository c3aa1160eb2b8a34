"""The shell's own logic: Session + Pump + a device, on virtual time, with stand-in engines.

The stand-ins (``stand_in_engines.py``) answer instantly and predictably; what
is tested is the wiring: what the session asks of the engines, which
commands reach the device, the played counts, and one timeline for every
stored and emitted time. The real engines run in tests/integration.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pytest
from stand_in_engines import (
    OUTPUT_RATE,
    WORD_S,
    StandInEngines,
    StandInLLM,
    StandInRecognizer,
    StandInSmartTurn,
    silence,
    tone,
)

from core.audio import ASR_BLOCK, BLOCK_S
from core.commands import Command
from core.end_of_turn import EndOfTurnConfig
from core.events import (
    AsrFinal,
    BargeIn,
    EndOfTurnCheck,
    EndOfTurnText,
    Error,
    Event,
    PlaybackEnd,
    PlaybackPaused,
    PlaybackStart,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    SpeechEnd,
    SpeechStart,
    Truncate,
    TurnEnd,
)
from core.partials import PartialConfig
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.device import Captured
from shell.pump import Pump
from shell.session import Session
from shell.work import Serves
from transport.replay import ReplayDevice, replay

E = TypeVar("E", bound=Event)

QUESTION_HZ, INTERRUPTION_HZ, COUGH_HZ, TRAILING_HZ = 300, 700, 1500, 500
REPLY = "It is noon now and the sun is high in the sky today."
WORDS = {
    QUESTION_HZ: "what time is it",
    INTERRUPTION_HZ: "stop wait a moment",
    COUGH_HZ: "",
    TRAILING_HZ: "I would like a coffee and",
}


def make_session(
    reply: str = "It is noon. Have a good day.",
    echo_cancel: bool = False,
    smart_turn: StandInSmartTurn | None = None,
    partials: bool = False,
    engines: StandInEngines | None = None,
    **config,
) -> Session:
    """``partials``: the engines have a partial model too (the same stand-in words);
    ``engines``: another session's, shared (else its own)."""
    partial = StandInRecognizer(WORDS) if partials else None
    if engines is None:
        engines = StandInEngines(
            StandInRecognizer(WORDS), StandInLLM([reply, "Sure."]), asr_partial=partial, smart_turn=smart_turn
        )
    if smart_turn is None:
        config.setdefault("end_of_turn", None)  # no model: silence ends the turn
    events: list[Event] = []
    cfg = SessionConfig(echo_cancel=echo_cancel, **config)
    session = Session(engines, VirtualClock(), cfg, events.append, lockstep=True)  # type: ignore[arg-type]
    session.events = events  # type: ignore[attr-defined]
    return session


def of(session: Session, kind: type[E]) -> list[E]:
    return [e for e in session.events if isinstance(e, kind)]  # type: ignore[attr-defined]


class Recording(ReplayDevice):
    """A replay device that remembers the playback commands the session gave it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[tuple[str, float]] = []
        self.clock: VirtualClock | None = None

    def pause(self) -> None:
        self.commands.append(("pause", self.clock.now() if self.clock else 0.0))

    def resume(self) -> None:
        self.commands.append(("resume", self.clock.now() if self.clock else 0.0))

    def flush(self) -> None:
        self.commands.append(("flush", self.clock.now() if self.clock else 0.0))


async def run(session: Session, audio: np.ndarray, tail_s: float = 10.0) -> Recording:
    blocks = -(-len(audio) // ASR_BLOCK)
    quiet = np.zeros(ASR_BLOCK, dtype=np.float32)

    def source(i: int) -> np.ndarray | None:
        if i < blocks:
            return audio[i * ASR_BLOCK : (i + 1) * ASR_BLOCK]
        return None if session.idle else quiet

    device = Recording(source, session.output_rate)
    device.clock = session.clock  # type: ignore[assignment]
    await Pump(session, device, settle=True).run(max_ticks=blocks + round(tail_s / BLOCK_S))
    await session.aclose()
    return device


async def test_a_turn_is_heard_answered_and_played_on_one_timeline():
    session = make_session()
    device = await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    kinds = [type(e) for e in session.events]  # type: ignore[attr-defined]
    # The reply is started on the early final, before the endpoint (speculation, on by default).
    assert kinds[:4] == [SpeechStart, SpeculativeStart, SpeechEnd, AsrFinal] and kinds[-1] is TurnEnd
    (start,) = of(session, SpeechStart)
    (end,) = of(session, SpeechEnd)
    assert start.onset == pytest.approx(0.512, abs=0.04) and end.end == pytest.approx(1.7, abs=0.04)
    (final,) = of(session, AsrFinal)
    assert final.text == "what time is it"
    user, assistant = session.history.turns
    assert (user.role, user.text) == ("user", "what time is it")
    assert (assistant.role, assistant.text) == ("assistant", "It is noon. Have a good day.")
    # One timeline: the assistant's turn starts when its audio started playing, after the person's ended.
    (playing,) = of(session, PlaybackStart)
    assert assistant.t_start == pytest.approx(playing.t) and user.t_end < assistant.t_start < assistant.t_end
    # The reply track has the reply where the timeline says it played.
    first = int(np.argmax(np.abs(device.reply) > 0)) / OUTPUT_RATE
    assert first == pytest.approx(assistant.t_start, abs=0.001)
    assert device.commands == []  # nothing paused, resumed or dropped


async def test_a_barge_in_pauses_the_device_flushes_it_and_keeps_what_was_heard():
    session = make_session(reply=REPLY)
    # The reply starts about 0.55 s after the question ends; the interruption comes 1.2 s into it.
    audio = np.concatenate(
        [silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(1.75), tone(1.5, hz=INTERRUPTION_HZ), silence(0.2)]
    )
    device = await run(session, audio)
    assert [c for c, _ in device.commands] == ["pause", "flush"]  # commands, not events
    (paused,) = of(session, PlaybackPaused)
    assert device.commands[0][1] == paused.t
    (barge,) = of(session, BargeIn)
    assert barge.paused_at == paused.t
    (trunc,) = of(session, Truncate)
    heard_s = trunc.audio_end_ms / 1000
    playing = of(session, PlaybackStart)[0]
    assert heard_s == pytest.approx(paused.t - playing.t, abs=0.03)  # what played until the pause
    # Each stand-in word is 0.25 s: the words heard are those more than half played.
    n_heard = round(heard_s / WORD_S)
    expected = " ".join(
        ["It", "is", "noon", "now", "and", "the", "sun", "is", "high", "in", "the", "sky", "today."][:n_heard]
    )
    assert trunc.text == expected
    turns = [(t.role, t.text, t.interrupted) for t in session.history.turns]
    assert turns[:2] == [("user", "what time is it", False), ("assistant", expected, True)]
    assert turns[2][:2] == ("user", "stop wait a moment")
    # The next request carries the cut turn, marked as interrupted, never the unheard rest.
    request = session.engines.llm.requests[1]  # type: ignore[attr-defined]
    assert {"role": "assistant", "content": expected + " [interrupted by the user]"} in request


async def test_a_cough_over_the_reply_pauses_it_and_resumes_it_where_it_paused():
    session = make_session(reply="It is noon now and the sun is high in the sky today.")
    audio = np.concatenate(
        [silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(1.75), tone(0.25, hz=COUGH_HZ), silence(0.2)]
    )
    device = await run(session, audio)
    assert [c for c, _ in device.commands] == ["pause", "resume"]
    assert of(session, BargeIn) == []
    assert [t.text for t in session.history.turns][-1] == "It is noon now and the sun is high in the sky today."


async def test_a_speculative_reply_plays_only_from_the_endpoint_and_a_discarded_one_never():
    """A 0.3 s pause: the early final starts a reply, the person goes on (discarded), then the
    endpoint's early final starts another, committed: the one reply heard, from the endpoint."""
    session = make_session(reply="It is noon.")
    audio = [silence(0.5), tone(0.8, hz=QUESTION_HZ), silence(0.3), tone(0.6, hz=QUESTION_HZ), silence(0.2)]
    device = await run(session, np.concatenate(audio))
    kinds = [type(e) for e in session.events]  # type: ignore[attr-defined]
    assert kinds[:7] == [
        SpeechStart,
        SpeculativeStart,
        SpeculativeDiscard,
        SpeculativeStart,
        SpeechEnd,
        AsrFinal,
        SpeculativeCommit,
    ]
    (discard,) = of(session, SpeculativeDiscard)
    (commit,) = of(session, SpeculativeCommit)
    assert discard.reason == "speech" and discard.tokens == 3  # on virtual time it was all generated
    assert commit.ready and commit.response != discard.response
    assert [e.response for e in of(session, ResponseStart)] == [commit.response]
    assert all(getattr(e, "response", commit.response) == commit.response for e in session.events[3:])  # type: ignore[attr-defined]
    # Heard from the endpoint on, and only the committed reply; stored likewise.
    (end,) = of(session, SpeechEnd)
    first = int(np.argmax(np.abs(device.reply) > 0)) / OUTPUT_RATE
    assert end.t < first <= end.t + 0.04
    played = np.count_nonzero(np.abs(device.reply) > 0)
    assert played == pytest.approx(WORD_S * OUTPUT_RATE, abs=2)  # "Sure.", once
    assert [(t.role, t.text) for t in session.history.turns] == [("user", "what time is it"), ("assistant", "Sure.")]
    assert device.commands == [] and session.engines.speculation_budget.in_flight == 0  # type: ignore[attr-defined]
    assert session._speaking.held == {}  # type: ignore[attr-defined]


async def test_no_speculation_when_switched_off():
    session = make_session(speculate=False)
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    assert of(session, SpeculativeStart) == [] and [t.role for t in session.history.turns] == ["user", "assistant"]


def test_no_closing_partials_without_speculation():
    """A closing partial is there to start the speculation: without it, only previews."""

    def partials(**config) -> PartialConfig | None:
        return make_session(partials=True, **config)._listening.hearing._partials  # type: ignore[attr-defined]

    assert partials(speculate=False).closing_after_s is None
    assert partials().closing_after_s == PartialConfig().closing_after_s


async def test_played_counts_from_the_device_are_what_the_ledger_counts():
    session = make_session(reply="One two three.")
    device = await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    played = np.count_nonzero(np.abs(device.reply) > 0)
    assert played == pytest.approx(3 * WORD_S * OUTPUT_RATE, abs=2)
    (end,) = of(session, PlaybackEnd)
    (start,) = of(session, PlaybackStart)
    assert end.t - start.t == pytest.approx(3 * WORD_S, abs=BLOCK_S)


async def test_a_late_played_report_of_a_cut_reply_counts_for_nothing():
    session = make_session()
    session.played(7, 10_000)  # no reply in flight
    assert session.events == []  # type: ignore[attr-defined]


async def test_the_timeline_starts_with_the_devices_first_audio():
    """A device that delivers nothing for a while (a sound card starting) does not shift the timeline."""
    session = make_session()
    audio = np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)])
    ticks = {"n": 0}
    pos = {"i": 0}

    class Late(ReplayDevice):
        def capture(self) -> Captured | None:
            ticks["n"] += 1
            if ticks["n"] <= 50:  # one second of nothing
                return Captured(np.zeros(0, dtype=np.float32))
            return super().capture()

    def source(i: int) -> np.ndarray | None:
        pos["i"] = i
        if i * ASR_BLOCK < len(audio):
            return audio[i * ASR_BLOCK : (i + 1) * ASR_BLOCK]
        return None if session.idle else np.zeros(ASR_BLOCK, dtype=np.float32)

    await Pump(session, Late(source, OUTPUT_RATE), settle=True).run(max_ticks=1000)
    await session.aclose()
    (start,) = of(session, SpeechStart)
    assert start.onset == pytest.approx(0.512, abs=0.04)  # audio time ...
    assert start.t == pytest.approx(0.512 + 0.192, abs=0.05)  # ... and clock time agree


async def test_replay_runs_the_same_pump():
    session = make_session()
    result = await replay(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]), True)
    assert [t.role for t in session.history.turns] == ["user", "assistant"]
    assert len(result.reply) == round(result.duration_s / BLOCK_S + 1) * round(BLOCK_S * OUTPUT_RATE)


async def test_partials_are_shed_over_sessions_sharing_one_budget():
    a = make_session(partials=True)
    b = make_session(partials=True, engines=a.engines)  # one recognizer, one budget
    audio = np.concatenate([silence(0.2), tone(2.5, hz=QUESTION_HZ)])
    for i in range(len(audio) // ASR_BLOCK):  # both hear speech at once; no settling: passes stay in flight
        a.push_audio(audio[i * ASR_BLOCK : (i + 1) * ASR_BLOCK])
        b.push_audio(audio[i * ASR_BLOCK : (i + 1) * ASR_BLOCK])
    assert a.engines.partial_budget.in_flight == 1  # the second session's due pass was skipped, not queued
    await a.settle()
    await b.settle()
    assert a.engines.partial_budget.in_flight == 0
    await a.aclose()
    await b.aclose()


# -- the end of the turn, decided by a (stand-in) end-of-turn model -----------------------

EOT = EndOfTurnConfig(first_check_s=0.2, recheck_s=0.3, max_wait_s=1.5)


def turn_session(probabilities: list[float | Exception], **config) -> Session:
    return make_session(smart_turn=StandInSmartTurn(probabilities), end_of_turn=EOT, **config)


async def test_a_finished_turn_ends_at_the_first_check_and_is_answered():
    session = turn_session([0.9])
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    (check,) = of(session, EndOfTurnCheck)
    (end,) = of(session, SpeechEnd)
    assert (check.decision, check.probability, check.utterance) == ("end", 0.9, 1)
    assert check.silence_s == pytest.approx(0.2, abs=0.032)
    assert end.t == check.t and end.t - end.end < 0.25  # not the 0.5 s hangover
    assert session.events.index(check) < session.events.index(end)  # type: ignore[attr-defined]
    assert (session.history.turns[0].role, session.history.turns[0].text) == ("user", "what time is it")
    # The model heard the utterance with its pre-roll, up to the check.
    (start,) = of(session, SpeechStart)
    (heard_s,) = session.engines.smart_turn.calls  # type: ignore[attr-defined]
    preroll = session.config.endpoint.preroll_s
    assert heard_s == pytest.approx(end.end + check.silence_s - (start.onset - preroll), abs=0.001)


async def test_a_pause_the_model_calls_unfinished_keeps_one_turn():
    session = turn_session([0.1])
    audio = np.concatenate([silence(0.5), tone(0.8, hz=QUESTION_HZ), silence(0.6), tone(0.6, hz=QUESTION_HZ)])
    await run(session, np.concatenate([audio, silence(0.2)]))
    assert len(of(session, SpeechStart)) == len(of(session, SpeechEnd)) == 1
    assert [t.role for t in session.history.turns] == ["user", "assistant"]
    checks = of(session, EndOfTurnCheck)
    assert [c.decision for c in checks] == ["wait"] * len(checks) and len(checks) >= 2
    # Nobody called it finished: the silence did, at max_wait_s.
    (end,) = of(session, SpeechEnd)
    assert end.t - end.end == pytest.approx(EOT.max_wait_s, abs=BLOCK_S + 0.032)


async def test_a_failed_check_is_reported_and_the_turn_ends_at_max_wait():
    session = turn_session([RuntimeError("onnx")])
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    (error,) = of(session, Error)
    assert error.where == "end_of_turn" and "onnx" in error.message
    (check,) = of(session, EndOfTurnCheck)  # one failure a pause: it is left to silence
    assert check.decision == "failed" and check.probability is None
    (end,) = of(session, SpeechEnd)
    assert end.t - end.end == pytest.approx(EOT.max_wait_s, abs=BLOCK_S + 0.032)
    assert (session.history.turns[0].role, session.history.turns[0].text) == ("user", "what time is it")


async def test_the_early_transcript_weighs_in():
    """The early final ("... and") is ready before the first check: 0.7 is not sure enough."""
    session = turn_session([0.7, 0.95])
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=TRAILING_HZ), silence(0.2)]))
    first, second = of(session, EndOfTurnCheck)[:2]
    assert (first.decision, first.trails_off) == ("wait", True)
    assert (second.decision, second.trails_off) == ("end", True)  # 0.95 x 0.6 >= 0.5


async def test_words_the_llm_reads_as_unfinished_hold_the_turn_open():
    """The stand-in LLM says the sentence does not end there: the model's 0.9 is overruled."""
    session = turn_session([0.9, 0.9, 0.9, 0.9])
    session.engines.llm.next_tokens = {",": 0.6, " the": 0.2, ".": 0.001}  # type: ignore[attr-defined]
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    (text,) = of(session, EndOfTurnText)[:1]
    assert (text.text, text.sentence_end, text.unfinished, text.ended) == ("what time is it", 0.001, True, False)
    assert session.engines.llm.asked[0] == "What time is it"  # type: ignore[attr-defined]
    (end,) = of(session, SpeechEnd)
    assert end.t - end.end == pytest.approx(EOT.max_wait_s, abs=BLOCK_S + 0.032)


async def test_a_failed_llm_reading_leaves_the_sound_to_decide():
    session = turn_session([0.9])

    async def broken(text: str, k: int = 20) -> dict[str, float]:
        raise RuntimeError("engine gone")

    session.engines.llm.next_token_probabilities = broken  # type: ignore[attr-defined,method-assign]
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    (error,) = of(session, Error)
    assert error.where == "end_of_turn_text"
    (text,) = of(session, EndOfTurnText)
    assert text.sentence_end is None and not text.unfinished
    (end,) = of(session, SpeechEnd)
    assert end.t - end.end < 0.25


def test_the_end_of_turn_model_is_the_default():
    assert SessionConfig().end_of_turn == EndOfTurnConfig()


async def test_silence_alone_needs_no_model():
    session = make_session(end_of_turn=None)
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    assert of(session, EndOfTurnCheck) == []
    (end,) = of(session, SpeechEnd)
    assert end.t - end.end == pytest.approx(session.config.endpoint.hangover_s, abs=BLOCK_S + 0.032)


def test_end_of_turn_decisions_without_the_model_are_refused():
    with pytest.raises(ValueError, match="end-of-turn model"):
        make_session(end_of_turn=EOT)
    with pytest.raises(ValueError, match="end-of-turn model"):
        make_session(end_of_turn=SessionConfig().end_of_turn)  # the default needs it too


async def test_the_closing_partial_is_read_first_and_the_same_words_are_not_read_again():
    """The pause's closing partial (64 ms into the silence) is read for the end of the turn
    before the early final (128 ms); the final hears the same words, so the LLM is asked once."""
    session = turn_session([0.9], partials=True)
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    closing, early = of(session, EndOfTurnText)
    (end,) = of(session, SpeechEnd)
    assert closing.t - end.end == pytest.approx(0.064, abs=0.032) and closing.t < early.t <= end.t
    assert closing.text == early.text == "what time is it" and closing.sentence_end == early.sentence_end
    assert session.engines.llm.asked == ["What time is it"]  # type: ignore[attr-defined]


# -- the command table, and the one submission point for engine work ------------------


def test_every_command_the_core_gives_has_a_handler():
    assert set(typing.get_args(Command)) == set(make_session().handlers)


async def test_an_unknown_command_is_an_error_never_ignored():
    @dataclass(frozen=True)
    class Unknown:
        response: int

    with pytest.raises(TypeError, match="no handler for the core's command"):
        make_session()._run([Unknown(1)])  # type: ignore[list-item]


async def test_engine_work_is_submitted_with_what_it_serves():
    session = make_session(echo_cancel=True)
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    submitted = session._work.submitted  # type: ignore[attr-defined]
    assert submitted[Serves.HEARING] > 0  # the echo canceller, every block
    assert submitted[Serves.DECISION] > 0  # the early final (and the final's pass)
    assert submitted[Serves.BACKGROUND] > 0  # the speculative reply and its speech

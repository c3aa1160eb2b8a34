"""The expectations of a scenario, checked on what happened (pure: events and transcript in, checks out).

A turn's utterances are those whose speech began within its audio; its replies are the ones
started for those utterances. Times are on the session's timeline (virtual time), so a figure is
the same on every run. The judge's answer is the one check that is not repeatable: it is marked so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.events import AsrFinal, BargeIn, Event, PlaybackStart, ResponseStart, SpeechStart, ToolCallStart, Truncate
from core.keypad import KeypadConfig
from core.tool_rounds import is_hook_call
from core.words import letters, unspaced, words
from voice.scenario.feed import Placed
from voice.scenario.flow_checks import flow_checks
from voice.scenario.spec import Expectation, Scenario, ToolExpectation

ONSET_SLACK_S = 0.1  # the VAD's onset may come a little before the sound's first loud frame
KEYED_AFTER_S = KeypadConfig().pause_s + 0.1  # keys with no "#" are a turn once the keypad's pause is over
IGNORED_AFTER_S = 2.0  # a sound that was ignored: no barge-in this long after it either


@dataclass(frozen=True)
class Check:
    """One expectation of one turn (None: the conversation's), and how it went."""

    turn: int | None
    name: str
    passed: bool
    figure: str  # what was measured ("640 ms", the reply's words)
    message: str = ""  # why it failed
    deterministic: bool = True  # False: the judge's answer

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if self.deterministic:
            del out["deterministic"]
        return out


@dataclass(frozen=True)
class Judgement:
    """The judge's answer to a yes/no question about a reply, and how sure it was ("yes 0.78, no 0.22")."""

    yes: bool
    answer: str


@dataclass
class Observed:
    """What happened in a scenario's session."""

    events: list[Event]
    transcript: list[dict[str, Any]]  # the session's history, as stored
    placed: list[Placed]
    ended: bool = False  # the conversation ended (a goodbye was played, a quiet line was hung up)
    reply_languages: dict[int, str] = field(default_factory=dict)  # reply id: the language Whisper heard
    judged: dict[tuple[int | None, str], Judgement] = field(default_factory=dict)  # (turn, question)
    said: list[str] = field(default_factory=list)  # each turn's label, the caller's lines after the scenario's

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def utterances(self, p: Placed) -> set[int]:
        """The utterances turn ``p`` made: speech that began in it, and keys pressed in it (a turn
        of keys heard at ``#`` or once the keypad's pause is over: numbered below 0, as typed)."""
        spoken = {e.utterance for e in self.of(SpeechStart) if p.start - ONSET_SLACK_S <= e.onset < p.end}
        keyed = {e.utterance for e in self.of(AsrFinal) if e.utterance < 0 and p.start <= e.t <= p.end + KEYED_AFTER_S}
        return spoken | keyed

    def replies(self, utterances: set[int]) -> list[int]:
        return [e.response for e in self.of(ResponseStart) if e.utterance in utterances]

    def reply_text(self, responses: Iterable[int]) -> str:
        wanted = set(responses)
        return " ".join(t["text"] for t in self.transcript if t["role"] == "assistant" and t.get("response") in wanted)

    def heard_text(self, utterances: set[int]) -> str:
        return " ".join(e.text for e in self.of(AsrFinal) if e.utterance in utterances and e.text)


def check(scenario: Scenario, observed: Observed) -> list[Check]:
    """Every expectation of ``scenario``, in order: turn by turn, then the conversation's."""
    out: list[Check] = []
    for i, turn in enumerate(scenario.turns):
        placed = next((p for p in observed.placed if p.index == i), None)
        if placed is None:
            out.append(Check(i, "said", False, "-", "the conversation ended before this turn"))
            continue
        if placed.waited_out:
            out.append(Check(i, "started", False, f"{placed.start:.2f} s", "its cue never came: started anyway"))
        out += _turn_checks(i, turn.expect, placed, observed)
        following = [p.start for p in observed.placed if p.index > i]
        out += [Check(i, *o) for o in flow_checks(turn.expect, observed.events, min(following, default=float("inf")))]
    out += _conversation_checks(scenario.expect, observed)
    return out + [Check(None, *o) for o in flow_checks(scenario.expect, observed.events, float("inf"))]


def _turn_checks(i: int, expect: Expectation, p: Placed, obs: Observed) -> list[Check]:
    utterances = obs.utterances(p)
    replies = obs.replies(utterances)
    reply = obs.reply_text(replies)
    out: list[Check] = []
    if expect.heard is not None:
        heard = obs.heard_text(utterances)
        ok = _holds(heard, expect.heard)
        why = "" if ok else f"the transcript does not hold {expect.heard!r}"
        out.append(Check(i, "heard", ok, _quoted(heard), why))
    if expect.answered_within_ms is not None:
        out.append(_answered(i, expect.answered_within_ms, p, replies, obs))
    if expect.says is not None:
        ok = _holds(reply, expect.says)
        out.append(Check(i, "reply says", ok, _quoted(reply), "" if ok else f"the reply does not say {expect.says!r}"))
    if expect.said is not None:
        ok = expect.said in reply  # word for word, and heard whole: a reply cut short holds only what was heard
        why = "" if ok else f"the reply does not hold {expect.said!r} whole"
        out.append(Check(i, "said exactly", ok, _quoted(reply), why))
    if expect.matches is not None:
        ok = re.search(expect.matches, reply, re.IGNORECASE) is not None
        why = "" if ok else f"the reply does not match /{expect.matches}/"
        out.append(Check(i, "reply matches", ok, _quoted(reply), why))
    if expect.language is not None:
        heard_as = [obs.reply_languages[r] for r in replies if r in obs.reply_languages]
        ok = bool(heard_as) and all(code == expect.language for code in heard_as)
        figure = ", ".join(heard_as) or "no reply"
        out.append(Check(i, "reply language", ok, figure, "" if ok else f"not heard as {expect.language}"))
    if expect.tool is not None:
        out.append(_tool(i, expect.tool, replies, obs))
    if expect.one_turn:
        out.append(_one_turn(i, p, utterances, obs))
    if expect.interrupts_within_ms is not None:
        out += _interrupts(i, expect.interrupts_within_ms, p, utterances, obs)
    if expect.ignored:
        out.append(_ignored(i, p, replies, obs))
    if expect.ended:
        out.append(_ended(i, obs))
    if expect.judge is not None:
        out.append(_judged(i, expect.judge, obs))
    return out


def _conversation_checks(expect: Expectation, obs: Observed) -> list[Check]:
    out: list[Check] = []
    if expect.ended:
        out.append(_ended(None, obs))
    if expect.judge is not None:
        out.append(_judged(None, expect.judge, obs))
    if expect.no_other_replies:
        out.append(_no_other_replies(obs))
    return out


def _no_other_replies(obs: Observed) -> Check:
    """Nothing but the person's turns was answered, or cut a reply: not the TV, not the room."""
    turns = set().union(*(obs.utterances(p) for p in obs.placed)) if obs.placed else set()
    others = {e.utterance: e.t for e in obs.of(SpeechStart) if e.utterance not in turns}
    answered = [e for e in obs.of(ResponseStart) if e.utterance in others]
    cuts = [e for e in obs.of(BargeIn) if e.utterance in others]
    if not answered and not cuts:
        heard = f"{len(others)} other utterance{'s' if len(others) != 1 else ''}, none answered"
        return Check(None, "no other replies", True, heard)
    first = answered[0].utterance if answered else cuts[0].utterance
    said = obs.heard_text({first})
    why = f"{'answered' if answered else 'a barge-in by'} speech at {others[first]:.2f} s that no turn said"
    return Check(None, "no other replies", False, _quoted(said), why)


def _answered(i: int, within_ms: float, p: Placed, replies: list[int], obs: Observed) -> Check:
    starts = {e.response: e.t for e in obs.of(PlaybackStart)}
    played = [starts[r] for r in replies if r in starts]
    if not played:
        return Check(i, "answered", False, "no reply", f"no reply was played (within {within_ms:.0f} ms expected)")
    ms = (played[0] - p.speech_end) * 1000
    if ms < 0:  # talked over: the turn was taken as over at a pause inside it
        why = f"a reply started at {played[0]:.2f} s, before the speech ended at {p.speech_end:.2f} s"
        return Check(i, "answered", False, f"{ms:.0f} ms", why)
    ok = ms <= within_ms
    return Check(i, "answered", ok, f"{ms:.0f} ms", "" if ok else f"later than {within_ms:.0f} ms after the speech")


def _tool(i: int, expected: ToolExpectation, replies: list[int], obs: Observed) -> Check:
    # The agent's hooks are its own code, not calls the turn made (core/steps.py).
    calls = [e for e in obs.of(ToolCallStart) if e.response in replies and not is_hook_call(e.call_id)]
    figure = ", ".join(f"{c.name}({c.arguments})" for c in calls) or "no call"
    if expected.name is None:
        return Check(i, "no tool", not calls, figure, "" if not calls else "a tool was called")
    ok = any(c.name == expected.name and _arguments_hold(c.arguments, expected.arguments) for c in calls)
    want = f"{expected.name}({json.dumps(expected.arguments, ensure_ascii=False) if expected.arguments else ''})"
    return Check(i, "tool", ok, figure, "" if ok else f"no call {want}")


def _arguments_hold(given: str, expected: dict[str, Any]) -> bool:
    try:
        args = json.loads(given or "{}")
    except ValueError:
        return False
    if not isinstance(args, dict):
        return False
    for key, want in expected.items():
        if key not in args:
            return False
        got = args[key]
        if isinstance(want, str) and isinstance(got, str):
            if want.strip().lower() != got.strip().lower():
                return False
        elif isinstance(want, int | float) and isinstance(got, int | float) and not isinstance(got, bool):
            if float(want) != float(got):
                return False
        elif want != got:
            return False
    return True


def _one_turn(i: int, p: Placed, utterances: set[int], obs: Observed) -> Check:
    finals = [e for e in obs.of(AsrFinal) if e.utterance in utterances and e.text]
    early = [e for e in obs.of(ResponseStart) if e.utterance in utterances and e.t < p.speech_end]
    ok = len(finals) == 1 and not early
    figure = f"{len(finals)} turn{'s' if len(finals) != 1 else ''}"
    why = ""
    if early:
        why = f"a reply started at {early[0].t:.2f} s, before the speech ended at {p.speech_end:.2f} s"
    elif len(finals) != 1:
        why = "cut into " + " | ".join(repr(e.text) for e in finals) if finals else "not heard at all"
    return Check(i, "one turn", ok, figure, why)


def _interrupts(i: int, within_ms: float, p: Placed, utterances: set[int], obs: Observed) -> list[Check]:
    cuts = [e for e in obs.of(BargeIn) if e.utterance in utterances]
    if not cuts:
        return [Check(i, "interrupts", False, "no barge-in", "the reply was not stopped")]
    cut = cuts[0]
    ms = (cut.paused_at - p.speech_start) * 1000
    ok = ms <= within_ms
    out = [Check(i, "interrupts", ok, f"{ms:.0f} ms", "" if ok else f"stopped later than {within_ms:.0f} ms")]
    return [*out, _heard_only(i, cut.response, obs)]


def _heard_only(i: int, response: int, obs: Observed) -> Check:
    """The cut reply is stored as what was played of it, no more."""
    heard = next((e.text for e in obs.of(Truncate) if e.response == response), None)
    stored = [t for t in obs.transcript if t["role"] == "assistant" and t.get("response") == response]
    if not stored:
        ok = not heard
        return Check(i, "stored as heard", ok, "nothing stored", "" if ok else f"{heard!r} was heard but not stored")
    turn = stored[0]
    said, generated = words(turn["text"]), words(turn.get("generated_text") or turn["text"])
    ok = (
        bool(turn.get("interrupted"))
        and (heard is None or turn["text"] == heard)
        and said == generated[: len(said)]
        and len(said) < len(generated)
    )
    why = "" if ok else f"stored {turn['text']!r} of {turn.get('generated_text')!r} (heard: {heard!r})"
    return Check(i, "stored as heard", ok, _quoted(turn["text"]), why)


def _ignored(i: int, p: Placed, replies: list[int], obs: Observed) -> Check:
    cuts = [e for e in obs.of(BargeIn) if p.start <= e.t <= p.end + IGNORED_AFTER_S]
    if cuts:
        return Check(i, "ignored", False, f"barge-in at {cuts[0].t:.2f} s", "it cut the reply")
    if replies:
        return Check(i, "ignored", False, _quoted(obs.reply_text(replies)), "it was answered")
    return Check(i, "ignored", True, "no barge-in, no reply")


def _ended(i: int | None, obs: Observed) -> Check:
    return Check(i, "ended", obs.ended, "ended" if obs.ended else "still open", "" if obs.ended else "it did not end")


def _judged(i: int | None, question: str, obs: Observed) -> Check:
    j = obs.judged.get((i, question))
    if j is None:
        return Check(i, "judge", False, "-", "not judged (no reply to judge)", deterministic=False)
    return Check(i, "judge", j.yes, j.answer, "" if j.yes else f"no to {question!r}", deterministic=False)


def _holds(text: str, wanted: str) -> bool:
    """``text`` holds ``wanted``'s words in a row (case and punctuation ignored; characters in a row
    for a script that does not space its words)."""
    have, want = " ".join(words(text)), " ".join(words(wanted))
    if want and f" {want} " in f" {have} ":
        return True
    return any(unspaced(c) for c in wanted) and letters(wanted) in letters(text)


def _quoted(text: str, limit: int = 80) -> str:
    return json.dumps(text if len(text) <= limit else text[: limit - 1] + "…", ensure_ascii=False)

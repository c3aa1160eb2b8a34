"""A scenario file, read and checked: the agent, the person's turns, what each turn expects.

Every mistake in a file is one :class:`ScenarioError` naming the file and where in it
(``turns[2].expect.tool``), before anything is loaded. Paths are relative to the file.
docs/guide/scenarios.md is the reference of the format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from core.keypad import KEYS as KEYPAD_KEYS

SOUNDS_DIR = Path(__file__).parent / "sounds"

CueKind = Literal["at", "after_reply_start", "after_reply_end"]


class ScenarioError(ValueError):
    """A scenario file that cannot be run as written."""


@dataclass(frozen=True)
class Cue:
    """When a turn starts: at ``seconds`` on the timeline, or ``seconds`` after the reply (to the turn
    before) starts playing, or after the assistant has finished and gone quiet."""

    kind: CueKind
    seconds: float


@dataclass(frozen=True)
class Pause:
    """Silence of ``seconds`` inserted after the word ``after`` (its first occurrence)."""

    after: str
    seconds: float


@dataclass(frozen=True)
class Mix:
    """A sound mixed into the turn: ``path`` from ``at`` seconds into the turn (None: under all of it,
    looped), at ``snr_db`` under the turn's speech or with its peak at ``db`` dBFS."""

    path: Path
    at: float | None = None
    snr_db: float | None = None
    db: float | None = None


@dataclass(frozen=True)
class ToolExpectation:
    """A call of ``name`` (None: no call at all) whose arguments hold ``arguments`` (strings compared
    without case)."""

    name: str | None
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Expectation:
    """What a turn expects; every field left at its default is not checked."""

    answered_within_ms: float | None = None  # from the end of its speech to the reply's first sample
    says: str | None = None  # the reply (as heard and stored) holds these words
    matches: str | None = None  # the reply matches this regular expression (case ignored)
    language: str | None = None  # Whisper hears the reply's audio in this language
    tool: ToolExpectation | None = None
    one_turn: bool = False  # the utterance stayed one turn: not cut at its pauses
    interrupts_within_ms: float | None = None  # it cut the reply this soon after its speech began
    ignored: bool = False  # no barge-in, no reply: a sound, a backchannel
    ended: bool = False  # the conversation ended (a goodbye, a quiet line hung up)
    judge: str | None = None  # a yes/no question about the reply, asked of the local model
    heard: str | None = None  # the person's transcript holds these words
    # The conversation's: nothing but the person's turns was answered or cut a reply (a TV, the room).
    no_other_replies: bool = False
    # An agent's flow (--agent): the step it is in after the turn, the fields collected by then, and
    # the number or address the call was transferred to (voice/scenario/flow_checks.py).
    step: str | None = None
    state: dict[str, Any] | None = None
    transferred: str | None = None
    said: str | None = None  # the reply, as heard and stored, holds this exact text (an agent's own words)

    def kinds(self) -> list[str]:
        """The names of the checks asked for, in the order they are reported."""
        out = [name for name, value in self.__dict__.items() if value not in (None, False)]
        return out


@dataclass(frozen=True)
class Turn:
    """One thing the person does: say ``text``, play the recording ``audio``, make ``sound``, or
    press ``keys`` on a phone's keypad."""

    text: str | None = None
    audio: Path | None = None
    cue: Cue | None = None  # None: the default (0.5 s in for the first, after the reply ends for the rest)
    pause: Pause | None = None
    mix: tuple[Mix, ...] = ()
    db: float | None = None  # the turn's peak level (dBFS); None: a recording as it is, text at the person's
    expect: Expectation = field(default_factory=Expectation)
    keys: str | None = None  # DTMF keys, pressed one after another ("4512#")

    @property
    def label(self) -> str:
        if self.text is not None:
            return f'"{self.text}"'
        if self.keys is not None:
            return f"keys {self.keys}"
        assert self.audio is not None
        return self.audio.name


@dataclass(frozen=True)
class Person:
    """Who says the text turns: a voice that is not the assistant's."""

    voice: str = "joe"
    speed: float = 0.9  # joe, slower than the assistant's joe
    language: str = "en"
    db: float = -7.0  # the peak of what they say, dBFS


@dataclass(frozen=True)
class Echo:
    """The assistant's voice coming back into the microphone (speakers, not headphones)."""

    db: float = -20.0
    delay_ms: float = 40.0


@dataclass(frozen=True)
class Keys:
    """A caller's line pressed on the phone's keypad rather than said (``{keys: "4#"}``)."""

    keys: str


Line = str | Keys  # what a caller says, or keys


def line_turn(line: Line) -> Turn:
    """The person's turn that says (or keys) a caller's ``line``."""
    return Turn(keys=line.keys) if isinstance(line, Keys) else Turn(text=line)


@dataclass(frozen=True)
class Answer:
    """What the caller says when a reply holds one of ``when`` (case and punctuation ignored).

    ``say``: the first time, then each time the same question comes again (the last repeats).
    ``unless``: a check of what the reply read back: for the first phrase the reply does not hold
    (alternatives split by ``|``), its line is said instead of ``say`` (a correction).
    ``over_s``: said this long into the first reply that matches, over it, once (an interruption);
    it is never said after a reply."""

    when: tuple[str, ...]
    say: tuple[Line, ...]
    unless: tuple[tuple[str, Line], ...] = ()
    over_s: float | None = None

    def lines(self) -> list[Line]:
        return [*self.say, *(line for _, line in self.unless)]


@dataclass(frozen=True)
class Caller:
    """A scenario's caller: after its turns, the person answers each reply by ``answers``; a reply
    none matches gets ``otherwise`` (None: the caller says nothing more). At most ``max_turns``."""

    answers: tuple[Answer, ...]
    otherwise: Line | None = None
    max_turns: int = 12

    def lines(self) -> list[Line]:
        """Every line the caller may say, each once."""
        out = [line for a in self.answers for line in a.lines()]
        if self.otherwise:
            out.append(self.otherwise)
        return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    agent: dict[str, Any]  # voice.run's options by name (system_prompt, tools, language, ...)
    call: bool  # held as a phone call: a greeting first, a line gone quiet hung up (the --call-* options)
    person: Person
    turns: tuple[Turn, ...]
    echo: Echo | None = None
    listen_s: float = 0.0  # after the last turn and the assistant's answer, listen on this long
    room: Mix | None = None  # a sound under the whole conversation, looped: a TV, a busy room, a street
    expect: Expectation = field(default_factory=Expectation)  # the conversation's own (ended, judge)
    caller: Caller | None = None  # after the turns, the person answers what each reply asks


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file. Raises ScenarioError."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ScenarioError(f"{path}: cannot be read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not YAML ({e})") from None
    return scenario_from(data, path)


def scenario_from(data: Any, path: Path) -> Scenario:
    """The scenario ``data`` (the file's YAML) describes; ``path``: the file, whose folder paths are in."""
    r = _Reader(path)
    top = r.mapping(data, "", {"name", "agent", "person", "turns", "echo", "listen_s", "room", "expect", "caller"})
    agent = dict(r.mapping(top.get("agent", {}), "agent"))
    call = bool(agent.pop("call", False))
    if isinstance(agent.get("tools"), str | list):
        given = agent["tools"] if isinstance(agent["tools"], list) else [agent["tools"]]
        agent["tools"] = [_tool(path, str(t)) for t in given]
    if isinstance(agent.get("agent"), str):
        agent["agent"] = _tool(path, agent["agent"])  # relative to the scenario's folder too
    person_data = r.mapping(top.get("person", {}), "person", {"voice", "speed", "language", "db"})
    person = Person(
        **{k: r.number(v, f"person.{k}") if k in ("speed", "db") else str(v) for k, v in person_data.items()}
    )
    turns_data = top.get("turns")
    if not isinstance(turns_data, list) or not turns_data:
        raise ScenarioError(f"{path}: turns: a list of the person's turns is needed")
    turns = tuple(r.turn(t, f"turns[{i}]") for i, t in enumerate(turns_data))
    echo = None
    if "echo" in top:
        e = r.mapping(top["echo"], "echo", {"db", "delay_ms"})
        echo = Echo(**{k: r.number(v, f"echo.{k}") for k, v in e.items()})
    return Scenario(
        name=str(top.get("name") or path.stem),
        path=path,
        agent=agent,
        call=call,
        person=person,
        turns=turns,
        echo=echo,
        listen_s=r.number(top.get("listen_s", 0.0), "listen_s"),
        room=r.mix(top["room"], "room", at=False) if "room" in top else None,
        expect=r.expectation(top.get("expect", {}), "expect", scenario=True),
        caller=r.caller(top["caller"], "caller") if "caller" in top else None,
    )


def _tool(path: Path, value: str) -> str:
    """A tools file relative to the scenario's folder (``builtin`` as it is)."""
    return value if value == "builtin" or Path(value).is_absolute() else str(path.parent / value)


TURN_KEYS = {
    "say",
    "audio",
    "sound",
    "keys",
    "at",
    "after_reply_start",
    "after_reply_end",
    "pause",
    "noise",
    "mix",
    "db",
}
EXPECT_KEYS = {
    "answered_within_ms",
    "reply",
    "tool",
    "one_turn",
    "interrupts",
    "ignored",
    "ended",
    "judge",
    "heard",
    "step",
    "state",
    "transferred",
    "said",
}


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {where + ': ' if where else ''}{message}")

    def mapping(self, value: Any, where: str, keys: set[str] | None = None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"a mapping is needed, not {type(value).__name__}")
        if keys is not None and (unknown := sorted(set(value) - keys)):
            raise self.fail(where, f"unknown key {unknown[0]!r} (one of {', '.join(sorted(keys))})")
        return value

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(where, f"a number is needed, not {value!r}")
        return float(value)

    def file(self, value: Any, where: str) -> Path:
        if not isinstance(value, str) or not value:
            raise self.fail(where, "a file name is needed")
        p = Path(value) if Path(value).is_absolute() else self.path.parent / value
        if not p.is_file():
            raise self.fail(where, f"{value}: no such file")
        return p

    def sound(self, value: Any, where: str) -> Path:
        """A bundled sound by name (cough, ...) or a file."""
        if isinstance(value, str) and (SOUNDS_DIR / f"{value}.wav").is_file():
            return SOUNDS_DIR / f"{value}.wav"
        if isinstance(value, str) and "/" not in value and "." not in value:
            names = ", ".join(sorted(p.stem for p in SOUNDS_DIR.glob("*.wav")))
            raise self.fail(where, f"no bundled sound {value!r} (bundled: {names}; or a file)")
        return self.file(value, where)

    def turn(self, value: Any, where: str) -> Turn:
        t = self.mapping(value, where, TURN_KEYS | {"expect"})
        given = [k for k in ("say", "audio", "sound", "keys") if k in t]
        if len(given) != 1:
            raise self.fail(
                where, "one of say (text), audio (a file), sound (a bundled sound or file) or keys (DTMF) is needed"
            )
        text = audio = keys = None
        if "keys" in t:
            keys = self.keys(t["keys"], f"{where}.keys")
        elif "say" in t:
            if not isinstance(t["say"], str) or not t["say"].strip():
                raise self.fail(f"{where}.say", "the text to say is needed")
            text = t["say"].strip()
        elif "audio" in t:
            audio = self.file(t["audio"], f"{where}.audio")
        else:
            audio = self.sound(t["sound"], f"{where}.sound")
        cues = [k for k in ("at", "after_reply_start", "after_reply_end") if k in t]
        if len(cues) > 1:
            raise self.fail(where, f"one start is needed, not {' and '.join(cues)}")
        cue = Cue(cues[0], self.number(t[cues[0]], f"{where}.{cues[0]}")) if cues else None
        pause = None
        if "pause" in t:
            p = self.mapping(t["pause"], f"{where}.pause", {"after", "s"})
            if not isinstance(p.get("after"), str) or "s" not in p:
                raise self.fail(f"{where}.pause", "after (a word) and s (seconds) are needed")
            pause = Pause(p["after"], self.number(p["s"], f"{where}.pause.s"))
        mixes = []
        if "noise" in t:
            n = self.mapping(t["noise"], f"{where}.noise", {"sound", "snr_db"})
            if "snr_db" not in n or "sound" not in n:
                raise self.fail(f"{where}.noise", "sound (a bundled sound or file) and snr_db are needed")
            mixes.append(Mix(self.sound(n["sound"], f"{where}.noise.sound"), None, self.number(n["snr_db"], where)))
        mixes += [self.mix(m, f"{where}.mix[{i}]") for i, m in enumerate(t.get("mix") or [])]
        db = self.number(t["db"], f"{where}.db") if "db" in t else None
        expect = self.expectation(t.get("expect", {}), f"{where}.expect")
        if keys is not None and (pause or mixes or db is not None):
            raise self.fail(where, "keys are pressed as they are: no pause, noise, mix or db")
        return Turn(text, audio, cue, pause, tuple(mixes), db, expect, keys)

    def caller(self, value: Any, where: str) -> Caller:
        c = self.mapping(value, where, {"answers", "otherwise", "max_turns"})
        if not isinstance(c.get("answers"), list) or not c["answers"]:
            raise self.fail(f"{where}.answers", "a list of answers is needed")
        answers = tuple(self.answer(a, f"{where}.answers[{i}]") for i, a in enumerate(c["answers"]))
        otherwise = self.said(c["otherwise"], f"{where}.otherwise")[0] if "otherwise" in c else None
        max_turns = int(self.number(c.get("max_turns", 12), f"{where}.max_turns"))
        return Caller(answers, otherwise, max_turns)

    def answer(self, value: Any, where: str) -> Answer:
        a = self.mapping(value, where, {"when", "say", "unless", "over_s"})
        if "when" not in a or "say" not in a:
            raise self.fail(where, "when (the words of a reply) and say (what the caller answers) are needed")
        unless = self.mapping(a.get("unless", {}), f"{where}.unless")
        return Answer(
            when=self.lines(a["when"], f"{where}.when"),
            say=self.said(a["say"], f"{where}.say"),
            unless=tuple((str(k), self.said(v, f"{where}.unless.{k}")[0]) for k, v in unless.items()),
            over_s=self.number(a["over_s"], f"{where}.over_s") if "over_s" in a else None,
        )

    def said(self, value: Any, where: str) -> tuple[Line, ...]:
        """A caller's line, or a list of them: a text, or ``{keys: "4#"}`` pressed on the keypad."""
        given = value if isinstance(value, list) else [value]
        out: list[Line] = []
        for i, v in enumerate(given):
            if isinstance(v, dict):
                keyed = self.mapping(v, f"{where}[{i}]", {"keys"})
                if "keys" not in keyed:
                    raise self.fail(f"{where}[{i}]", 'a text, or keys: {keys: "4#"}')
                out.append(Keys(self.keys(keyed["keys"], f"{where}[{i}].keys")))
            else:
                out += self.lines(v, where)
        if not out:
            raise self.fail(where, "a text or a list of texts is needed")
        return tuple(out)

    def keys(self, value: Any, where: str) -> str:
        keys = str(value)
        if not keys or set(keys) - KEYPAD_KEYS:
            raise self.fail(where, f"keys of a phone's keypad are needed (0-9 * # A-D), not {keys!r}")
        return keys

    def lines(self, value: Any, where: str) -> tuple[str, ...]:
        """A text, or a list of texts (none empty)."""
        given = value if isinstance(value, list) else [value]
        if not given or not all(isinstance(v, str | int | float) and str(v).strip() for v in given):
            raise self.fail(where, "a text or a list of texts is needed")
        return tuple(str(v).strip() for v in given)

    def mix(self, value: Any, where: str, at: bool = True) -> Mix:
        """A sound mixed in at a level (``at``: it may start at a time; a room's runs throughout)."""
        m = self.mapping(value, where, {"sound", "at", "snr_db", "db"} if at else {"sound", "snr_db", "db"})
        if "sound" not in m or ("snr_db" in m) == ("db" in m):
            raise self.fail(where, "sound, and one of snr_db or db, are needed")
        start = self.number(m["at"], f"{where}.at") if "at" in m else None
        level = {k: self.number(m[k], f"{where}.{k}") for k in ("snr_db", "db") if k in m}
        return Mix(self.sound(m["sound"], f"{where}.sound"), start, **level)

    def expectation(self, value: Any, where: str, scenario: bool = False) -> Expectation:
        flow = {"step", "state", "transferred"}
        e = self.mapping(value, where, {"ended", "judge", "no_other_replies", *flow} if scenario else EXPECT_KEYS)
        out: dict[str, Any] = {}
        if "answered_within_ms" in e:
            out["answered_within_ms"] = self.number(e["answered_within_ms"], f"{where}.answered_within_ms")
        if "reply" in e:
            reply = self.mapping(e["reply"], f"{where}.reply", {"says", "matches", "language"})
            for key, got in reply.items():
                if not isinstance(got, str) or not got:
                    raise self.fail(f"{where}.reply.{key}", "a text is needed")
            out.update(reply)
        if "tool" in e:
            out["tool"] = self.tool(e["tool"], f"{where}.tool")
        for flag in ("one_turn", "ignored", "ended", "no_other_replies"):
            if flag in e:
                if not isinstance(e[flag], bool):
                    raise self.fail(f"{where}.{flag}", "true or false")
                out[flag] = e[flag]
        if "interrupts" in e:
            i = self.mapping(e["interrupts"], f"{where}.interrupts", {"within_ms"})
            if "within_ms" not in i:
                raise self.fail(f"{where}.interrupts", "within_ms is needed")
            out["interrupts_within_ms"] = self.number(i["within_ms"], f"{where}.interrupts.within_ms")
        if "state" in e:
            out["state"] = dict(self.mapping(e["state"], f"{where}.state"))
        for text in ("judge", "heard", "step", "transferred", "said"):
            if text in e:
                if not isinstance(e[text], str) or not e[text].strip():
                    raise self.fail(f"{where}.{text}", "a text is needed")
                out[text] = e[text].strip()
        return Expectation(**out)

    def tool(self, value: Any, where: str) -> ToolExpectation:
        if value == "none" or value is None or value is False:
            return ToolExpectation(None)
        t = self.mapping(value, where, {"name", "arguments"})
        if not isinstance(t.get("name"), str):
            raise self.fail(where, "the tool's name is needed (or none: no call)")
        return ToolExpectation(t["name"], dict(self.mapping(t.get("arguments", {}), f"{where}.arguments")))

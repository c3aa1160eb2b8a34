"""What ``python -m voice.bench fuzz`` throws at the server, made from a seed, and how its answers are read.

Pure: no sockets, no clock. The malformed messages of both dialects (``/ws`` and ``/v1/realtime``) by
category, from templates of every client message ``docs/protocol.md`` documents;
:func:`voice.bench.fuzz.corpus.corpus` draws them with random mutations, :mod:`voice.bench.fuzz.raw` builds
the raw frames and crafted HTTP requests, :mod:`voice.bench.fuzz.server_log` reads the server's log. The same
seed gives the same bytes, so a run can be repeated and a finding replayed.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from voice.bench.fuzz.raw import frame

WS = "ws"
REALTIME = "realtime"
DIALECTS = (WS, REALTIME)
PATHS = {WS: "/ws", REALTIME: "/v1/realtime"}

# The categories, in the order they are reported.
CATEGORIES = (
    "invalid_json",
    "deep_nesting",
    "not_an_object",
    "bad_type",
    "unknown_type",
    "wrong_field_type",
    "huge_number",
    "lone_surrogate",
    "oversized_text",
    "out_of_order",
    "binary_frame",
    "base64_garbage",
    "ws_frame",
    "flood",
    "mutation",
)


@dataclass(frozen=True)
class Fuzz:
    """Frames sent back to back on one connection, then answered as one (a probe follows them).

    ``fresh``: on ``/ws``, sent before ``hello`` (on a connection that has not
    said it); otherwise after it. ``/v1/realtime`` sessions start at the
    handshake, so it has no such state. ``raw``: frame-level abuse, written
    as bytes on a socket of its own (:func:`frame`), not through a client library.
    """

    dialect: str
    category: str
    frames: tuple[str | bytes, ...]
    note: str
    fresh: bool = False
    raw: bool = False

    @property
    def messages(self) -> int:
        return len(self.frames)


# -- the documented client messages --------------------------------------------

_PCM_10MS_24K = base64.b64encode(bytes(480)).decode()  # 10 ms of silence: mutations stay near silence

WS_TEMPLATES: dict[str, dict[str, Any]] = {
    "hello": {"type": "hello", "sample_rate": 16000, "acks": True, "lead_ms": 120, "echo_cancel": True,
              "session": "0" * 32},
    "played": {"type": "played", "samples": 0, "dropped": 0},
    "cancel": {"type": "cancel"},
}  # fmt: skip

_FORMAT = {"type": "audio/pcm", "rate": 24000}
REALTIME_TEMPLATES: dict[str, dict[str, Any]] = {
    "session.update": {
        "type": "session.update",
        "event_id": "evt_1",
        "session": {
            "type": "realtime",
            "instructions": "Answer in one short sentence.",
            "output_modalities": ["audio"],
            "audio": {
                "input": {
                    "format": dict(_FORMAT),
                    "transcription": {"model": "whisper"},
                    "turn_detection": {"type": "server_vad", "create_response": True, "interrupt_response": True},
                },
                "output": {"format": dict(_FORMAT), "voice": "piper"},
            },
        },
    },
    "input_audio_buffer.append": {"type": "input_audio_buffer.append", "event_id": "evt_2", "audio": _PCM_10MS_24K},
    "input_audio_buffer.commit": {"type": "input_audio_buffer.commit", "event_id": "evt_3"},
    "input_audio_buffer.clear": {"type": "input_audio_buffer.clear", "event_id": "evt_4"},
    "response.cancel": {"type": "response.cancel", "event_id": "evt_5", "response_id": "resp_1"},
    "response.create": {"type": "response.create", "event_id": "evt_6",
                        "response": {"instructions": "Say hi.", "output_modalities": ["audio"]}},
    "conversation.item.truncate": {"type": "conversation.item.truncate", "event_id": "evt_7",
                                   "item_id": "item_a1_00000000", "content_index": 0, "audio_end_ms": 100},
    "conversation.item.create": {"type": "conversation.item.create", "event_id": "evt_8",
                                 "item": {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": "hi"}]}},
}  # fmt: skip

TEMPLATES = {WS: WS_TEMPLATES, REALTIME: REALTIME_TEMPLATES}

# The /ws connection the fuzzer sends its "after hello" messages on says this.
WS_HELLO = json.dumps({"type": "hello", "sample_rate": 16000, "acks": True})


def probe(n: int) -> str:
    """A message every dialect answers with exactly one ``unknown_type`` error that names ``n``."""
    return json.dumps({"type": f"fuzz.probe.{n}"})


PROBE_RE = re.compile(r"fuzz\.probe\.(\d+)")


def _dumps(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


_RAW = "@@raw@@"  # a placeholder value, replaced by literal JSON text after dumping


def _with_literal(message: dict[str, Any], path: tuple[Any, ...], literal: str) -> str:
    """``message`` as JSON text, with the value at ``path`` replaced by ``literal`` (any text at all)."""
    m = copy.deepcopy(message)
    _set(m, path, _RAW)
    return _dumps(m).replace(f'"{_RAW}"', literal, 1)


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def field_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every value's path in ``obj`` (objects and lists are values too, and so are their members)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from field_paths(value, (*prefix, key))


def _kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    return type(value).__name__


def path_name(path: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


# Values of every JSON type: each field gets those that are not its own type.
WRONG_VALUES: tuple[Any, ...] = (None, True, False, 0, -1, 2.5, "", "text", [], [0], {}, {"k": "v"})

# Numbers JSON can spell that a program may not expect: past Python's 4,300-digit limit
# for int() (json.loads raises), just under it, past 64 bits, past a double, non-finite.
HUGE_LITERALS: tuple[str, ...] = (
    "9" * 4300,
    "-" + "9" * 4300,
    "9" * 4301,
    "1" + "0" * 100_000,
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "1e400",
    "-1e400",
    "1e-400",
    "1.7976931348623157e308",
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    "4.9e-324",
)

SURROGATES: tuple[str, ...] = ('"\\ud800"', '"a\\udfffb"', '"\\udc00\\ud800"', '"\\ud800\\u0000"')


def _numeric_paths(template: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [p for p in field_paths(template) if _kind(_get(template, p)) in ("int", "float")]


def _string_paths(template: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [p for p in field_paths(template) if isinstance(_get(template, p), str)]


def _fresh(dialect: str, name: str) -> bool:
    """``/ws``'s hello variants go on a connection that has not said hello; the rest after it."""
    return dialect == WS and name == "hello"


def _field_fuzz(dialect: str) -> list[Fuzz]:
    out: list[Fuzz] = []
    for name, template in TEMPLATES[dialect].items():
        fresh = _fresh(dialect, name)
        for path in field_paths(template):
            if path == ("type",):
                continue  # a non-string type is bad_type's
            original = _get(template, path)
            for value in WRONG_VALUES:
                if _kind(value) == _kind(original):
                    continue
                m = copy.deepcopy(template)
                _set(m, path, value)
                note = f"{name} {path_name(path)}={_dumps(value)}"
                out.append(Fuzz(dialect, "wrong_field_type", (_dumps(m),), note, fresh))
        for path in _numeric_paths(template):
            for literal in HUGE_LITERALS:
                note = f"{name} {path_name(path)}={literal[:12]}{'…' if len(literal) > 12 else ''}"
                out.append(Fuzz(dialect, "huge_number", (_with_literal(template, path, literal),), note, fresh))
        for path in _string_paths(template):
            for literal in SURROGATES:
                note = f"{name} {path_name(path)}={literal}"
                out.append(Fuzz(dialect, "lone_surrogate", (_with_literal(template, path, literal),), note, fresh))
        key = _dumps(template)[:-1] + ',"\\ud800":1}'  # in a key
        out.append(Fuzz(dialect, "lone_surrogate", (key,), f"{name} key \\ud800", fresh))
    return out


def _invalid_json(dialect: str, rng: random.Random) -> list[Fuzz]:
    first = "hello" if dialect == WS else "session.update"
    valid = _dumps(TEMPLATES[dialect][first])
    texts = [
        "", " ", "\n", "{", "}", "[", "]", "{}}", "{{}", '{"type"', '{"type":', '{"type":"cancel"',
        '{"type":cancel}', "{'type':'cancel'}", '{"type":"cancel",}', '{"type":"cancel"}}', '{"type":"cancel"} x',
        '{"type":"cancel"}{"type":"cancel"}', '{"type":"cancel"}\n{"type":"cancel"}', "\x00", '{"type":"cancel"\x00}',
        "\ufeff" + '{"type":"cancel"}', '/* c */{"type":"cancel"}', '{"type":"cancel"} // c', '{"a" "b"}',
        '{"type":"cancel","x":.5}', '{"type":"cancel","x":+1}', '{"type":"cancel","x":0x10}',
        '{"type":"cancel","x":1.}', '{"type":"cancel","x":01}', '{"type":"cancel","x":1_0}',
        '{"type":"cancel","x":undefined}', '{"type":"cancel","x":nan}', '{"type":"cancel","x":inf}',
        '{"type":"cancel","x":True}', '{"type":"cancel","x":None}', '{"type":"\\x41"}', '{"type":"\\u12"}',
        '{"type":"\\uZZZZ"}', '{"type":"\\"}', '{"type":"a\tb"}', '{"type":"a\nb"}', '"unterminated',
        "true false", "NaN{", "[1,2", "1 2", "--1", "{:}", '{"":}', '{"type" : "cancel" ,, }',
        valid[: len(valid) // 2], valid[1:], valid[:-1], valid + "]", valid.replace('"', "'"),
        valid.replace(":", "="), valid.replace(",", ";"),
    ]  # fmt: skip
    for _ in range(30):  # printable garbage
        texts.append("".join(rng.choice('{}[]":,0123456789abcdeftrunl\\ .-+eE') for _ in range(rng.randint(1, 80))))
    for _ in range(20):  # any character but a lone surrogate (no client can send one in a text frame)
        texts.append("".join(_random_char(rng) for _ in range(rng.randint(1, 60))))
    return [Fuzz(dialect, "invalid_json", (t,), f"{t[:24]!r}") for t in texts]


def _deep(dialect: str) -> list[Fuzz]:
    name = "hello" if dialect == WS else "session.update"
    template = TEMPLATES[dialect][name]
    field = ("sample_rate",) if dialect == WS else ("session", "instructions")
    out = []
    for depth in (500, 1_000, 5_000, 20_000, 100_000):
        shapes = {
            "lists": "[" * depth + "]" * depth,
            "objects": '{"a":' * depth + "1" + "}" * depth,
            "in a field": _with_literal(template, field, "[" * depth + "]" * depth),
            "in type": '{"type":' + "[" * depth + "]" * depth + "}",
            "unclosed": "[" * depth,
        }
        for shape, text in shapes.items():
            fresh = dialect == WS and shape == "in a field"
            out.append(Fuzz(dialect, "deep_nesting", (text,), f"{depth} levels, {shape}", fresh))
    return out


def _not_object(dialect: str) -> list[Fuzz]:
    texts = ['"hello"', '"{\\"type\\":\\"hello\\"}"', '""', "0", "-1.5", "1e400", "NaN", "[]", "[[]]",
             '[{"type":"hello","sample_rate":16000}]', "null", "true", "false", "[null]", '["cancel"]']  # fmt: skip
    return [Fuzz(dialect, "not_an_object", (t,), t[:30]) for t in texts]


def _bad_type(dialect: str) -> list[Fuzz]:
    texts = [
        "{}", '{"type":null}', '{"type":1}', '{"type":1.0}', '{"type":true}', '{"type":["cancel"]}',
        '{"type":{"type":"cancel"}}', '{"Type":"cancel"}', '{"type ":"cancel"}', '{"sample_rate":16000}',
        '{"type":"cancel","type":"hello"}', '{"type":"hello","type":null}', '{"type":[]}', '{"type":{}}',
    ]  # fmt: skip
    return [Fuzz(dialect, "bad_type", (t,), t[:40]) for t in texts]


def _unknown(dialect: str, rng: random.Random) -> list[Fuzz]:
    other = list(TEMPLATES[REALTIME if dialect == WS else WS])
    names = [
        "Hello", "HELLO", " hello", "hello ", "hello\n", "hello\x00", "", "x" * 10_000, "error", "ready",
        "response.output_audio.delta", "session.created", "__proto__", "constructor", "toString",
        "transcription_session.update", "output_audio_buffer.clear", "conversation.item.delete",
        "conversation.item.retrieve", "input_audio_buffer.append ", "💥", "../../etc/passwd", "%s%s%n",
        "{{7*7}}", "${jndi:ldap://x}", "\u202ehello", "h\u0000ello", *other,
    ]  # fmt: skip
    names += ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz._") for _ in range(rng.randint(1, 30))) for _ in range(20)]
    return [Fuzz(dialect, "unknown_type", (_dumps({"type": n}),), f"{n[:24]!r}") for n in names]


def _oversized(dialect: str) -> list[Fuzz]:
    kb900 = 900_000
    out = [
        Fuzz(dialect, "oversized_text", (_dumps({"type": "t" * kb900}),), "900 kB type"),
        Fuzz(dialect, "oversized_text", (_dumps({"type": "cancel", "pad": "y" * kb900}),), "900 kB unknown field"),
        Fuzz(dialect, "oversized_text", (" " * (1 << 20),), "1 MiB of spaces (the limit)"),
        Fuzz(dialect, "oversized_text", ("[" + "0," * 600_000 + "0]",), "1.2 MB message (over 1 MiB)"),
        Fuzz(dialect, "oversized_text", ('"' + "é" * 600_000 + '"',), "1.2 MB of two-byte UTF-8 (600k characters)"),
    ]
    if dialect == WS:
        hello = WS_TEMPLATES["hello"]
        out += [
            Fuzz(WS, "oversized_text", (_dumps({**hello, "session": "s" * kb900}),), "900 kB session id", True),
            Fuzz(WS, "oversized_text", (_dumps({**hello, "session": "🎤" * 225_000}),), "900 kB emoji session", True),
            Fuzz(WS, "oversized_text", (_dumps({"type": "played", "samples": 0, "x": "p" * kb900}),), "900 kB played"),
        ]
    else:
        update = REALTIME_TEMPLATES["session.update"]
        instructions = copy.deepcopy(update)
        instructions["session"]["instructions"] = "word " * (kb900 // 5)
        emoji = copy.deepcopy(update)
        emoji["session"]["instructions"] = "🎤" * 225_000
        truncate = {**REALTIME_TEMPLATES["conversation.item.truncate"], "item_id": "i" * kb900}
        audio = {**REALTIME_TEMPLATES["input_audio_buffer.append"], "audio": base64.b64encode(bytes(660_000)).decode()}
        out += [
            Fuzz(REALTIME, "oversized_text", (_dumps(instructions),), "900 kB instructions"),
            Fuzz(REALTIME, "oversized_text", (_dumps(emoji),), "900 kB emoji instructions"),
            Fuzz(REALTIME, "oversized_text", (_dumps(truncate),), "900 kB item_id"),
            Fuzz(REALTIME, "oversized_text", (_dumps(audio),), "880 kB of base64 audio (13.75 s)"),
        ]
    return out


def _out_of_order(dialect: str) -> list[Fuzz]:
    if dialect == WS:
        played = lambda s, d=0: _dumps({"type": "played", "samples": s, "dropped": d})  # noqa: E731
        no_acks = _dumps({"type": "hello", "sample_rate": 16000, "acks": False})
        cases = [
            ((bytes(640),), "audio before hello", True),
            ((played(0),), "played before hello", True),
            ((_dumps({"type": "cancel"}),), "cancel before hello", True),
            ((no_acks, played(480)), "played without acks", True),
            ((WS_HELLO,), "a second hello", False),
            ((_dumps({"type": "hello", "sample_rate": 48000}),), "a second hello at another rate", False),
            ((played(480), played(240)), "played goes back", False),
            ((played(0, 480), played(0, 240)), "dropped goes back", False),
            ((played(10**9),), "played more than was sent", False),
            ((played(2**63),), "played past 64 bits", False),
            ((played(10**4299),), "played with 4,300 digits", False),
            ((_dumps({"type": "cancel"}), _dumps({"type": "cancel"})), "cancel with no reply", False),
            ((bytes(640), WS_HELLO, bytes(640)), "audio, hello again, audio", False),
        ]
    else:
        t = REALTIME_TEMPLATES
        trunc = lambda item, end=100: _dumps({**t["conversation.item.truncate"], "item_id": item, "audio_end_ms": end})  # noqa: E731
        cases = [
            ((trunc("item_a1_00000000"),), "truncate of an unknown item", False),
            ((trunc(""),), "truncate of ''", False),
            ((trunc("item_u1_00000000"),), "truncate of a user item", False),
            ((trunc("resp_1", 10**12),), "truncate of a response id", False),
            ((trunc("item_a1_00000000", 10**4299),), "truncate at 4,300 digits of ms", False),
            ((_dumps(t["response.cancel"]),), "response.cancel with nothing in flight", False),
            ((_dumps(t["input_audio_buffer.commit"]),), "commit of an empty buffer", False),
            ((_dumps(t["input_audio_buffer.clear"]), _dumps(t["input_audio_buffer.commit"])), "clear, commit", False),
            ((_dumps(t["input_audio_buffer.append"]), _dumps(t["session.update"])), "update after audio", False),
            ((_dumps(t["response.create"]), _dumps(t["response.create"])), "response.create twice", False),
            ((_dumps(t["response.cancel"]), trunc("item_a1_00000000", 0)), "cancel, then truncate", False),
        ]
    return [Fuzz(dialect, "out_of_order", frames, note, fresh) for frames, note, fresh in cases]


def _binary(dialect: str, rng: random.Random) -> list[Fuzz]:
    sizes = (0, 1, 3, 319, 641, 65535, 65536, 65537, 65538, 131072, 500_000, 1 << 20, (1 << 20) + 2)
    if dialect == REALTIME:
        sizes = (0, 2, 320, 70_000)
    return [Fuzz(dialect, "binary_frame", (rng.randbytes(n),), f"{n} bytes") for n in sizes]


def _base64_garbage(rng: random.Random) -> list[Fuzz]:
    values = [
        "!!!!", "abc", "abcde", "YQ", "YQ=", "YQ==", "AAA=", "A===", "====", "=", "AAAA\nAAAA", " AAAA", "AAAA ",
        "AA AA", "AAAA\r\n", "data:audio/pcm;base64,AAAA", "ÀÀÀÀ", "AAA\x00", "-_-_", "QUFB" + "=" * 10,
        "!" * 100_000, base64.b64encode(bytes(3)).decode(), base64.b64encode(bytes(1)).decode(),
        base64.urlsafe_b64encode(b"\xfb\xff" * 8).decode(), "\u0660\u0661\u0662\u0663",
    ]  # fmt: skip
    for _ in range(15):
        raw = bytearray(base64.b64encode(rng.randbytes(rng.randrange(2, 200, 2))))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.choice(b"!@#$%^&*()<>?~`|. \t")
        values.append(raw.decode())
    append = REALTIME_TEMPLATES["input_audio_buffer.append"]
    return [
        Fuzz(
            REALTIME, "base64_garbage", (_dumps({**append, "audio": v}),), f"input_audio_buffer.append audio={v[:16]!r}"
        )
        for v in values
    ]


def _floods(dialect: str, size: int) -> list[Fuzz]:
    """``size`` messages per flood, sent back to back without reading."""
    if dialect == WS:
        floods = {
            "cancel": _dumps({"type": "cancel"}),
            "unknown type": _dumps({"type": "nope"}),
            "20 ms audio frames": bytes(640),
            "played": _dumps({"type": "played", "samples": 0}),
            "invalid JSON": "{",
        }
    else:
        t = REALTIME_TEMPLATES
        floods = {
            "10 ms appends": _dumps(t["input_audio_buffer.append"]),
            "session.update": _dumps(t["session.update"]),
            "response.cancel": _dumps(t["response.cancel"]),
            "commit": _dumps(t["input_audio_buffer.commit"]),
            "invalid JSON": "{",
        }
    return [Fuzz(dialect, "flood", (m,) * size, f"{size} x {name}") for name, m in floods.items()]


def _ws_frames(dialect: str) -> list[Fuzz]:
    """Frame-level abuse: what the WebSocket layer has to refuse (sent raw, one connection each)."""
    valid = _dumps({"type": "cancel"}).encode()
    cases = {
        "text frame, invalid UTF-8": frame(0x1, b'{"type":"\xff\xfe"}'),
        "text frame, a UTF-8-encoded surrogate": frame(0x1, b'{"type":"\xed\xa0\x80"}'),
        "unmasked frame": frame(0x1, valid, mask=False),
        "reserved opcode 0x3": frame(0x3, valid),
        "RSV1 set without an extension": frame(0x1, valid, rsv=0x40),
        "ping of 126 bytes": frame(0x9, bytes(126)),
        "fragmented ping": frame(0x9, b"x", fin=False),
        "continuation with no message": frame(0x0, valid),
        "text inside a fragmented binary": frame(0x2, b"\x00\x00", fin=False) + frame(0x1, valid),
        "close with code 999": frame(0x8, struct.pack("!H", 999)),
        "close with code 1005 (reserved)": frame(0x8, struct.pack("!H", 1005)),
        "close with invalid UTF-8 reason": frame(0x8, struct.pack("!H", 1000) + b"\xff"),
        "close with a 1-byte body": frame(0x8, b"\x03"),
        "a length of 2^63 - 1": bytes([0x81, 0xFF]) + struct.pack("!Q", 2**63 - 1) + bytes(4),
        "a 2 MB message in 1 kB fragments": b"".join(
            frame(0x1 if i == 0 else 0x0, b" " * 1024, fin=i == 2047) for i in range(2048)
        ),
        "a valid message in 200 one-byte fragments": b"".join(
            frame(0x1 if i == 0 else 0x0, valid[i : i + 1] if i < len(valid) else b" ", fin=i == 199)
            for i in range(200)
        ),
    }
    return [Fuzz(dialect, "ws_frame", (data,), note, raw=True) for note, data in cases.items()]


def _random_char(rng: random.Random) -> str:
    """Any character a text frame can carry (a lone surrogate cannot be encoded in UTF-8)."""
    pick = rng.random()
    if pick < 0.4:
        return chr(rng.randrange(0x20, 0x7F))
    if pick < 0.55:
        return chr(rng.randrange(0, 0x20))
    if pick < 0.8:
        return chr(rng.randrange(0x80, 0xD800))
    return chr(rng.choice((rng.randrange(0xE000, 0x10000), rng.randrange(0x10000, 0x110000))))

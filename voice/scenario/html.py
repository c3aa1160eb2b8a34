"""A scenario's page: both sides' waveforms, the turns, the events and the transcript on one timeline.

A failed check says what was measured; the page shows why. Where the person spoke, what the session
heard and decided, and what the person heard of the reply lie on the virtual timeline the figures
are measured on, under the conversation's own audio (playable, with a playhead; a click on the
timeline seeks). One file beside its WAV and nothing fetched, so it opens from a CI artifact.
The timeline is plain SVG drawn here, its labels packed into rows; the script only moves the playhead.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from core import events as ev
from voice.scenario.runner import ScenarioResult

W, X0, X1 = 1320, 112, 1304  # the timeline's width in SVG units, where the plot starts and ends
ROW, WAVE_H, GAP = 17, 64, 10  # a row of labels, a waveform's height, the space between lanes
CHAR_W = 6.4  # an 11 px label's mean character width, to pack labels into rows
LABEL_CHARS = 44  # a label longer than this is cut (the whole text is its tooltip)


@dataclass(frozen=True)
class Mark:
    """Something on the timeline: a point (``t1`` None) or a span, its label, CSS class and tooltip."""

    t0: float
    t1: float | None
    label: str
    kind: str
    title: str = ""
    inner: tuple[float, float] | None = None  # a part of the span drawn darker (the sound in a turn)


def write_report(path: Path, result: ScenarioResult, wav_name: str) -> None:
    """Write ``result``'s page at ``path``; ``wav_name``: its recording, beside it (``--report``)."""
    path.write_text(page(result, wav_name), encoding="utf-8")


def page(result: ScenarioResult, wav_name: str) -> str:
    """The page's HTML: the verdict, the player, the timeline, the checks and every event."""
    s = result.scenario
    stereo = result.recording.stereo()
    span = max(len(stereo) / result.output_rate, 0.1)
    passed = sum(c.passed for c in result.checks)
    verdict = "passed" if result.passed else "failed"
    meta = (
        f"{s.path.name} · {span:.2f} s on the virtual timeline · "
        f"{len(result.checks)} checks: {passed} passed, {len(result.checks) - passed} failed"
    )
    return TEMPLATE.format(
        name=_e(s.name),
        verdict=verdict,
        meta=_e(meta),
        wav=_e(quote(wav_name)),
        timeline=timeline(result, stereo, span),
        checks=checks_table(result),
        n_events=len(result.events),
        events=events_table(result),
        js=JS.replace("$X0", str(X0)).replace("$X1", str(X1)).replace("$SPAN", f"{span:.4f}"),
    )


def timeline(result: ScenarioResult, stereo: np.ndarray, span: float) -> str:
    """The SVG: the time axis, then a lane each for the turns, the events and waveforms, the transcript."""
    out: list[str] = []
    y = 22
    peak = max(float(np.abs(stereo).max(initial=0.0)), 0.05)
    person, assistant = _side_marks(result.events)
    turns = [
        Mark(p.start, p.end, f"{p.index + 1} · {result.said(p.index)}", "turn",
             f"turn {p.index + 1}: {p.start:.2f}–{p.end:.2f} s, speech {p.speech_start:.2f}–{p.speech_end:.2f} s",
             (p.speech_start, p.speech_end))
        for p in result.placed
    ]  # fmt: skip
    said = [
        Mark(t["t_start"], t.get("t_end", t["t_start"]), t["text"], t["role"], f"{t['role']} at {t['t_start']:.2f} s: "
             + t["text"] + (f" (of: {t['generated_text']})" if t.get("interrupted") else ""))
        for t in result.observed.transcript if t.get("t_start") is not None and t["text"]
    ]  # fmt: skip
    for name, marks in (("person's turns", turns), ("heard", person)):
        y = _lane(out, name, marks, y, span)
    y = _wave(out, "person", stereo[:, 0], peak, y, "person")
    y = _wave(out, "assistant", stereo[:, 1], peak, y, "assistant")
    y = _lane(out, "replied", assistant, y, span)
    y = _lane(out, "transcript", said, y, span)
    grid = [_axis(span, y)]
    for e in result.events:
        if isinstance(e, ev.BargeIn):
            grid.append(f'<line class="cut" x1="{_x(e.t, span)}" x2="{_x(e.t, span)}" y1="22" y2="{y}"/>')
    playhead = f'<line id="playhead" x1="{X0}" x2="{X0}" y1="14" y2="{y}"/>'
    body = "\n".join([*grid, *out, playhead])
    return f'<svg id="timeline" viewBox="0 0 {W} {y + 4}" role="img" aria-label="timeline">\n{body}\n</svg>'


# Each event's mark, by its class: the side it is on (True: the person's), its label, CSS class, tooltip.
MARKS: dict[type[ev.Event], Callable[[Any], tuple[bool, str, str, str]]] = {
    ev.SpeechStart: lambda e: (True, "speech", "vad", f"speech from {e.onset:.2f} s"),
    ev.SpeechEnd: lambda e: (True, "end", "vad", f"speech ended at {e.end:.2f} s"),
    ev.AsrFinal: lambda e: (True, _q(e.text) if e.text else "(no words)", "heard", ""),
    ev.Backchannel: lambda e: (True, f"backchannel {_q(e.text)}", "heard", ""),
    ev.ResponseStart: lambda e: (False, f"reply {e.response}", "reply", f"to {_q(e.text)}"),
    ev.TtsChunk: lambda e: (False, _q(e.text), "chunk", f"reply {e.response}, chunk {e.chunk}: {e.text}"),
    ev.PlaybackStart: lambda e: (False, "▶ plays", "play", f"reply {e.response}"),
    ev.PlaybackEnd: lambda e: (False, "■ played", "play", f"reply {e.response}"),
    ev.PlaybackPaused: lambda e: (False, "‖ paused", "pause", f"reply {e.response}"),
    ev.PlaybackResumed: lambda e: (False, f"▶ resumed ({e.reason})", "pause", f"reply {e.response}"),
    ev.BargeIn: lambda e: (False, "✕ barge-in", "cut", f"reply {e.response} paused at {e.paused_at:.2f} s"),
    ev.ToolCallStart: lambda e: (False, f"{e.name}({e.arguments})", "tool", ""),
    ev.ToolCallEnd: lambda e: (False, f"→ {e.result if e.status == 'ok' else e.status}", "tool", e.result),
    ev.Truncate: lambda e: (False, f"heard {_q(e.text)}", "cut", f"the first {e.audio_end_ms} ms"),
    ev.TurnEnd: lambda e: (False, "turn end, cut" if e.interrupted else "turn end", "reply", e.text),
    ev.Error: lambda e: (False, f"error in {e.where}: {e.message}", "error", ""),
}


def _side_marks(events: list[ev.Event]) -> tuple[list[Mark], list[Mark]]:
    """The events as marks: the person's side (what was heard) and the assistant's (what it did). The
    chunks of a reply synthesized at one instant (engine work takes no time on the timeline) are one mark."""
    person: list[Mark] = []
    assistant: list[Mark] = []
    chunks: dict[tuple[int, float], tuple[int, str]] = {}  # (reply, t): its mark, its first chunk's label
    for e in events:
        how = MARKS.get(type(e))
        if how is None:
            continue
        mine, label, kind, title = how(e)
        side = person if mine else assistant
        title = f"{e.t:.2f} s {e.type}: {title or label}"
        if isinstance(e, ev.TtsChunk) and (e.response, e.t) in chunks:
            i, first = chunks[(e.response, e.t)]
            more = side[i].title.count("\n") + 1
            side[i] = dataclasses.replace(
                side[i], label=f"{_cut(first, 30)} +{more}", title=f"{side[i].title}\n{title}"
            )
            continue
        if isinstance(e, ev.TtsChunk):
            chunks[(e.response, e.t)] = (len(side), label)
        side.append(Mark(e.t, None, label, kind, title))
    return person, assistant


def _lane(out: list[str], name: str, marks: list[Mark], y: float, span: float) -> float:
    """Marks packed into rows (the first whose last label ends before this one starts); the lane's end."""
    y += GAP
    out.append(f'<text class="lane" x="{X0 - 14}" y="{y + 12}">{_e(name)}</text>')
    ends: list[float] = []
    for m in sorted(marks, key=lambda m: m.t0):
        a = _x(m.t0, span)
        room = int((X1 - a - 10) / CHAR_W)  # a span's label is cut to the room it has, if that is not too little
        label = _cut(m.label, LABEL_CHARS if m.t1 is None or room < 12 else min(room, 2 * LABEL_CHARS))
        b = a if m.t1 is None else max(_x(m.t1, span), a + 2)
        width = len(label) * CHAR_W + 10
        left = a if a + width <= X1 else max(X0, a - width)  # near the end: the label to the left
        row = next((i for i, end in enumerate(ends) if end + 6 <= min(left, a)), len(ends))
        ends[row:row + 1] = [max(b, left + width)]  # fmt: skip
        top = y + row * ROW
        cls, x, w = ("tick", a - 1, 2.0) if m.t1 is None else ("band", a, b - a)
        out.append(
            f'<g class="{_e(m.kind)}"><title>{_e(m.title or m.label)}</title><rect class="{cls}" '
            f'x="{x:.1f}" y="{top + 1}" width="{w:.1f}" height="{ROW - 4}" rx="{0 if m.t1 is None else 3}"/>'
        )
        if m.inner is not None:
            i0, i1 = _x(m.inner[0], span), _x(m.inner[1], span)
            out.append(f'<rect class="inner" x="{i0}" y="{top + 1}" width="{max(i1 - i0, 1):.1f}" height="{ROW - 4}"/>')
        anchor, tx = ("", a + 5) if left == a else (' text-anchor="end"', a - 5)
        out.append(f'<text x="{tx:.1f}" y="{top + 12}"{anchor}>{_e(label)}</text></g>')
    return y + max(len(ends), 1) * ROW


def _wave(out: list[str], name: str, samples: np.ndarray, peak: float, y: float, kind: str) -> float:
    """The min/max envelope of ``samples`` (the whole timeline), a column per SVG unit."""
    y += GAP
    mid, half, n = y + WAVE_H / 2, WAVE_H / 2 - 1, X1 - X0
    x = np.pad(samples, (0, max(0, n - len(samples))))
    starts = np.linspace(0, len(x), n + 1)[:-1].astype(int)
    top = mid - np.maximum.reduceat(x, starts) / peak * half
    bottom = mid - np.minimum.reduceat(x, starts) / peak * half
    top, bottom = np.minimum(top, mid - 0.4), np.maximum(bottom, mid + 0.4)  # silence is a hairline
    edge = [f"{X0 + i},{v:.1f}" for i, v in enumerate(top)]
    edge += [f"{X0 + i},{v:.1f}" for i, v in reversed(list(enumerate(bottom)))]
    out.append(f'<text class="lane" x="{X0 - 14}" y="{mid + 4}">{_e(name)}</text>')
    out.append(f'<rect class="wavebg" x="{X0}" y="{y}" width="{n}" height="{WAVE_H}" rx="4"/>')
    out.append(f'<path class="wave {kind}" d="M{"L".join(edge)}Z"/>')
    return y + WAVE_H


def _axis(span: float, bottom: float) -> str:
    """Seconds along the top, and a faint line down the lanes at each."""
    step = next((s for s in (0.5, 1, 2, 5, 10, 20, 30, 60, 120) if s * (X1 - X0) / span >= 64), 300)
    out = []
    for i in range(int(span / step) + 1):
        x = _x(i * step, span)
        out.append(f'<line class="grid" x1="{x}" x2="{x}" y1="18" y2="{bottom}"/>')
        out.append(f'<text class="axis" x="{x}" y="12">{i * step:g} s</text>')
    return "\n".join(out)


def checks_table(result: ScenarioResult) -> str:
    rows = []
    for c in result.checks:
        turn = "conversation" if c.turn is None else str(c.turn + 1)
        said = "" if c.turn is None else result.scenario.turns[c.turn].label
        judge = (
            ""
            if c.deterministic
            else ' <span class="tag" title="the judge: a model\'s opinion, not a measurement">nondeterministic</span>'
        )
        mark = '<span class="pill pass">pass</span>' if c.passed else '<span class="pill fail">FAIL</span>'
        rows.append(
            f'<tr class="{"ok" if c.passed else "failed"}"><td title="{_e(said)}">{turn}</td>'
            f'<td>{_e(c.name)}{judge}</td><td>{mark}</td><td class="fig">{_e(c.figure)}</td>'
            f"<td>{_e(c.message)}</td></tr>"
        )
    if not rows:
        rows.append('<tr><td colspan="5" class="muted">no expectations</td></tr>')
    return "\n".join(rows)


def events_table(result: ScenarioResult) -> str:
    rows = []
    for e in result.events:
        fields = {k: v for k, v in e.to_json().items() if k not in ("t", "type")}
        rows.append(
            f"<tr><td>{e.t:.2f}</td><td>{_e(e.type)}</td><td>{_e(json.dumps(fields, ensure_ascii=False))}</td></tr>"
        )
    return "\n".join(rows)


def _x(t: float, span: float) -> float:
    return round(X0 + (X1 - X0) * min(max(t, 0.0), span) / span, 1)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _q(text: str) -> str:
    return f"“{text}”"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


JS = """
const audio = document.getElementById('audio'), svg = document.getElementById('timeline');
const head = document.getElementById('playhead'), now = document.getElementById('now');
const X0 = $X0, X1 = $X1, SPAN = $SPAN;
function draw() {
  const x = X0 + (X1 - X0) * Math.min(audio.currentTime / SPAN, 1);
  head.setAttribute('x1', x); head.setAttribute('x2', x);
  now.textContent = audio.currentTime.toFixed(2) + ' s';
}
function tick() { draw(); if (!audio.paused) requestAnimationFrame(tick); }
audio.addEventListener('play', tick);
['seeked', 'timeupdate', 'loadedmetadata'].forEach(k => audio.addEventListener(k, draw));
svg.addEventListener('click', e => {
  const p = new DOMPoint(e.clientX, e.clientY).matrixTransform(svg.getScreenCTM().inverse());
  audio.currentTime = Math.max(0, Math.min(SPAN, (p.x - X0) / (X1 - X0) * SPAN));
  draw();
});
"""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{name}: {verdict}</title>
<style>
:root {{ --ink: #1f2328; --muted: #6e7781; --line: #e4e6ea; --person: #3c6e9f; --assistant: #b4693a;
  --ok: #2d7a4b; --bad: #b42318; --tool: #7a5aa6; }}
body {{ margin: 0; background: #f7f7f5; color: var(--ink); font: 14px/1.45 system-ui, "Segoe UI", sans-serif; }}
main {{ max-width: 1340px; margin: 0 auto; padding: 22px 28px 40px; }} .meta, .muted {{ color: var(--muted); }}
h1 {{ font-size: 22px; font-weight: 600; margin: 0; display: flex; align-items: center; gap: 12px; }}
h2 {{ font-size: 13px; font-weight: 600; text-transform: uppercase; letter-spacing: .06em; color: var(--muted);
  margin: 26px 0 8px; }}
.badge {{ font-size: 12px; font-weight: 600; padding: 2px 10px; border-radius: 999px; color: #fff;
  text-transform: uppercase; letter-spacing: .05em; }} .badge.passed {{ background: var(--ok); }}
.badge.failed {{ background: var(--bad); }}
.card {{ background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }}
.player {{ display: flex; align-items: center; gap: 16px; margin-top: 16px; }} audio {{ width: 420px; height: 36px; }}
.key {{ display: inline-flex; align-items: center; gap: 6px; margin-right: 14px; color: var(--muted); }}
.key i {{ width: 12px; height: 12px; border-radius: 3px; }} #now {{ font-variant-numeric: tabular-nums; }}
#timeline {{ width: 100%; height: auto; display: block; cursor: crosshair; font-size: 11px; fill: var(--ink); }}
.axis {{ fill: var(--muted); text-anchor: middle; }} .band {{ fill: #eeeeee; }} .inner {{ fill: #b9cfe4; }}
.lane {{ fill: var(--muted); text-anchor: end; font-size: 10.5px; text-transform: uppercase; }}
.grid {{ stroke: var(--line); }} .wavebg {{ fill: #fafafa; }} .tick {{ fill: var(--muted); }}
.wave.person {{ fill: var(--person); }} .wave.assistant {{ fill: var(--assistant); }}
.turn .band {{ fill: #dfe8f2; }} .turn text, .heard text {{ fill: #24476b; }} .chunk .tick {{ fill: #d9ab8a; }}
.user .band {{ fill: #e3ecf5; }} .assistant .band {{ fill: #f6e6da; }} .tool .band {{ fill: #ece5f5; }}
.vad .tick, .heard .tick {{ fill: var(--person); }} .reply .tick, .play .tick {{ fill: var(--assistant); }}
.chunk text, .vad text, .pause text {{ fill: var(--muted); }} .tool text, .tool .tick {{ fill: var(--tool); }}
.cut text, .error text, .cut .tick, .error .tick {{ fill: var(--bad); }}
line.cut {{ stroke: var(--bad); stroke-dasharray: 3 4; opacity: .55; }}
#playhead {{ stroke: var(--ink); stroke-width: 1.5; pointer-events: none; }}
table {{ border-collapse: collapse; width: 100%; }} td {{ padding: 7px 10px; border-bottom: 1px solid var(--line); }}
th {{ text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; border-bottom: 1px solid var(--line);
  padding: 6px 10px; }} tr:last-child td {{ border-bottom: 0; }} tr.failed td {{ background: #fdf3f2; }}
.checks th:nth-child(1) {{ width: 90px; }} .checks th:nth-child(2) {{ width: 200px; }}
.checks th:nth-child(3) {{ width: 60px; }} .checks th:nth-child(4) {{ width: 40%; }}
.fig, .events td:last-child {{ font-family: ui-monospace, Menlo, monospace; font-size: 12.5px; }}
.pill {{ font-size: 11.5px; font-weight: 600; padding: 1px 8px; border-radius: 999px; }}
.pill.pass {{ color: var(--ok); background: #e7f3ec; }} .pill.fail {{ color: #fff; background: var(--bad); }}
.tag {{ font-size: 11px; color: var(--tool); background: #f1ecf8; border-radius: 4px; padding: 1px 6px;
  margin-left: 6px; }}
summary {{ cursor: pointer; color: var(--muted); }} .events td {{ font-size: 12px; padding: 3px 10px; }}
.events td:last-child {{ color: var(--muted); word-break: break-word; }}
</style></head>
<body><main>
<h1>{name} <span class="badge {verdict}">{verdict}</span></h1>
<div class="meta">{meta}</div>
<div class="player"><audio id="audio" controls preload="auto" src="{wav}"></audio><span id="now">0.00 s</span>
<span><span class="key"><i style="background: var(--person)"></i>the person (left)</span>
<span class="key"><i style="background: var(--assistant)"></i>the assistant as heard (right)</span>
<span class="key">click the timeline to seek</span></span></div>
<h2>Timeline</h2>
<div class="card">{timeline}</div>
<h2>Checks</h2>
<div class="card"><table class="checks"><thead><tr><th>turn</th><th>check</th><th></th><th>figure</th><th>message</th>
</tr></thead><tbody>
{checks}
</tbody></table></div>
<h2>Events</h2>
<details class="card"><summary>all {n_events} events, on the virtual timeline</summary>
<table class="events"><tbody>
{events}
</tbody></table></details>
</main>
<script>{js}</script>
</body></html>
"""

"""Double talk at the reply's start: the person goes on just as the assistant begins to answer.

    python -m voice.bench bargein --grid [--onsets 0,0.1,...] [--echo none,-30,...]
                                         [--cancellers aec3,linear,none] [--speakers aew,axb,...]
                                         [--out DIR] [--json-name FILE]
                                         (default: the whole grid, docs/bench, bargein_grid.json)

A person says one sentence, pauses, and the endpoint comes; they go on with a second sentence
``onset`` seconds after the reply started (0 to 1.0 s: "I'd like to book a table. For four,
please."). The reply is echoed back into the microphone through the simulated room
(``transport/echo_path.py``) at each echo level. Each speaker is one real recording pair of the
same person (the second sentence is theirs too), replayed on virtual time on the real engines with
the default session (Smart Turn ends the first sentence), replies capped at 24 tokens. The
reply's start is found once per speaker, by replaying the first sentence alone: on virtual time
it is the same in every run.

Cancellers: ``aec3`` (WebRTC's AEC3 for the VAD and the ASR alike), ``linear`` (the default:
AEC3 for the VAD and the echo gate, SpeexDSP's linear canceller for what Whisper hears) and
``none`` (no canceller, no echo gate). Per cell, over the speakers:

- lost: second sentences of which no word was stored as the person's;
- the error rate of what was stored (WER; CER for Japanese), and its difference from the same
  speech with no echo and the same canceller;
- pause: from the second sentence's onset to the reply's pause (the first ``playback_paused``);
- false barge-ins from the echo alone: the first sentence and silence, the reply echoed back.

Prints Markdown tables, writes DIR/JSON_NAME and a plot beside it (lost and WER by onset and echo).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.events import BargeIn, PlaybackPaused, PlaybackStart
from core.language import LanguageConfig
from shell.config import SessionConfig
from shell.engines import Engines
from transport.echo_path import EchoPath
from transport.files import load_audio
from voice.app.latency import percentile
from voice.bench.common import FIXTURES, ROOT, SHARED_SPEECH
from voice.bench.evaluate import run_audio
from voice.bench.fixtures import REPLY_ROOM_S, over_reply, shared_transcripts
from voice.bench.languages import recordings as language_recordings
from voice.bench.scoring import error_rate

ONSETS_S = tuple(round(0.1 * k, 1) for k in range(11))
ECHO_DB: tuple[float | None, ...] = (None, -30.0, -20.0, -10.0, -6.0)
ECHO_DELAY_MS = 30.0
CANCELLERS: dict[str, dict[str, Any]] = {
    "aec3": {"echo_cancel": True, "asr_audio": "suppressed"},
    "linear": {"echo_cancel": True, "asr_audio": "linear"},
    "none": {"echo_cancel": False},
}
LOST_AT = 1.0  # an error rate this high: nothing of the sentence was heard
REPLY_TOKENS = 24


@dataclass(frozen=True)
class Speaker:
    """One person: a first sentence, and the sentence they go on with (both theirs)."""

    name: str
    first: str  # a recording, or one recording split at ``split_s`` into both
    then: str | None = None
    split_s: float | None = None
    language: str = "en"

    def audio(self) -> tuple[np.ndarray, np.ndarray]:
        if self.split_s is not None:
            whole = load_audio(_path(self.first))
            cut = round(self.split_s * 16000)
            return whole[:cut], whole[cut:]
        assert self.then is not None
        return load_audio(_path(self.first)), load_audio(_path(self.then))

    def then_text(self) -> str:
        if self.split_s is not None:  # the recording's second sentence
            return _transcript(self.first).split("。", 1)[1]
        assert self.then is not None
        return _transcript(self.then)


def _path(name: str) -> Path:
    for folder in (FIXTURES, FIXTURES / "languages", SHARED_SPEECH):
        if (folder / f"{name}.wav").exists():
            return folder / f"{name}.wav"
    raise FileNotFoundError(name)


def _transcript(name: str) -> str:
    shared = shared_transcripts()
    if name in shared:
        return shared[name]
    return next(text for path, _, text in language_recordings() if path.stem == name)


SPEAKERS = {
    "aew": Speaker("aew", "cmu_arctic_us_aew_a0003", "cmu_arctic_us_aew_a0001"),
    "axb": Speaker("axb", "cmu_arctic_us_axb_a0004", "cmu_arctic_us_axb_a0006"),
    "lj": Speaker("lj", "ljspeech_LJ001-0002", "ljspeech_LJ001-0007"),
    # The issue's own recording: its 0.28 s pause ends the turn, and its second sentence follows.
    "ja": Speaker("ja", "ja_commonvoice_38853932", split_s=2.86, language="ja"),
}


def session_config(speaker: Speaker, canceller: str) -> SessionConfig:
    return dataclasses.replace(SessionConfig(), language=LanguageConfig(speaker.language), **CANCELLERS[canceller])


async def _run(engines: Engines, config: SessionConfig, audio: np.ndarray, echo_db: float | None):
    echo = EchoPath(echo_db, ECHO_DELAY_MS) if echo_db is not None else None
    run = await run_audio(engines, audio, config, echo)
    return run.events, run.transcript


def alone(first: np.ndarray) -> np.ndarray:
    """The first sentence, then silence while the reply plays."""
    return np.concatenate([first, np.zeros(round(REPLY_ROOM_S * 16000), dtype=np.float32)])


async def reply_start(engines: Engines, speaker: Speaker) -> tuple[float, str]:
    """When the reply to the first sentence starts playing (virtual time: the same in every run),
    and the first sentence's transcript."""
    first, _ = speaker.audio()
    events, turns = await _run(engines, session_config(speaker, "linear"), alone(first), None)
    return next(e.t for e in events if isinstance(e, PlaybackStart)), turns[0]["text"]


def after_first(said: list[str], first_heard: str) -> str:
    """What the person said after the first sentence: the turns after it, or, where the second
    sentence began before the endpoint and was heard in the same turn, the rest of that turn."""
    if not said:
        return ""
    if said[0] != first_heard and said[0].startswith(first_heard):
        said = [said[0][len(first_heard) :], *said[1:]]
    else:
        said = said[1:]
    return " ".join(said).strip()


async def one_cell(
    engines: Engines,
    speaker: Speaker,
    canceller: str,
    echo_db: float | None,
    onset_s: float,
    start: tuple[float, str],
) -> dict[str, Any]:
    """The person goes on ``onset_s`` into the reply that starts at ``start`` (its time, and the
    first sentence's transcript)."""
    first, then = speaker.audio()
    at = start[0] + onset_s
    # Room for the second sentence and its endpoint; the replay goes on until the reply to it is over.
    audio = over_reply(first, then, at)[: round((at + len(then) / 16000 + 3.0) * 16000)]
    events, turns = await _run(engines, session_config(speaker, canceller), audio, echo_db)
    users = [t for t in turns if t.get("role") == "user"]
    heard = after_first([t["text"] for t in users], start[1])
    err = error_rate(speaker.then_text(), heard, speaker.language) if heard else 1.0
    paused = next((e.t for e in events if isinstance(e, PlaybackPaused) and e.t >= at - 0.05), None)
    started = next((e.t for e in events if isinstance(e, PlaybackStart)), None)
    return {
        "speaker": speaker.name,
        "canceller": canceller,
        "echo_db": echo_db,
        "onset_s": onset_s,
        "reply_started_s": started,
        "heard": heard,
        "error": round(min(err, LOST_AT), 3),
        "lost": err >= LOST_AT,
        "pause_s": None if paused is None else round(paused - at, 3),
        "first_heard": users[0]["text"] if users else None,
    }


async def echo_only(engines: Engines, speaker: Speaker, canceller: str, echo_db: float) -> dict[str, Any]:
    first, _ = speaker.audio()
    events, turns = await _run(engines, session_config(speaker, canceller), alone(first), echo_db)
    return {
        "speaker": speaker.name,
        "canceller": canceller,
        "echo_db": echo_db,
        "false_barge_ins": sum(isinstance(e, BargeIn) for e in events),
        "pauses": sum(isinstance(e, PlaybackPaused) for e in events),
        "user_turns": sum(t.get("role") == "user" for t in turns),
    }


def _floats(text: str) -> list[float | None]:
    return [None if v == "none" else float(v) for v in text.split(",")]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--onsets", type=lambda s: [float(v) for v in s.split(",")], default=list(ONSETS_S))
    ap.add_argument("--echo", type=_floats, default=list(ECHO_DB), help="dB, or none (default: none,-30,-20,-10,-6)")
    ap.add_argument("--cancellers", type=lambda s: s.split(","), default=list(CANCELLERS))
    ap.add_argument("--speakers", type=lambda s: s.split(","), default=list(SPEAKERS))
    ap.add_argument("--json-name", default="bargein_grid.json")


def summarize(cells: list[dict[str, Any]], echo_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (canceller, echo, onset): lost, mean error, its excess over no echo, pause p50/max."""
    quiet = {(c["canceller"], c["speaker"], c["onset_s"]): c["error"] for c in cells if c["echo_db"] is None}
    table = []
    keys = sorted({(c["canceller"], c["echo_db"], c["onset_s"]) for c in cells}, key=lambda k: (k[0], _db(k[1]), k[2]))
    for canceller, db, onset in keys:
        group = [c for c in cells if (c["canceller"], c["echo_db"], c["onset_s"]) == (canceller, db, onset)]
        excess = [
            c["error"] - quiet[(canceller, c["speaker"], onset)]
            for c in group
            if (canceller, c["speaker"], onset) in quiet
        ]
        pauses = [c["pause_s"] for c in group if c["pause_s"] is not None]
        table.append({
            "canceller": canceller, "echo_db": db, "onset_s": onset, "runs": len(group),
            "lost": sum(c["lost"] for c in group),
            "error_mean": round(float(np.mean([c["error"] for c in group])), 3),
            "error_over_no_echo": round(float(np.mean(excess)), 3) if excess else None,
            "error_over_no_echo_max": round(float(np.max(excess)), 3) if excess else None,
            "pause_p50_s": percentile(pauses, 0.5), "pause_max_s": percentile(pauses, 1.0),
        })  # fmt: skip
    false = {}
    for row in echo_rows:
        key = f"{row['canceller']} {row['echo_db']:g}"
        false[key] = false.get(key, 0) + row["false_barge_ins"]
    return {"cells": table, "false_barge_ins": false}


def _db(db: float | None) -> float:
    return 0.0 if db is None else db - 100.0  # quiet to loud, then none


def print_tables(summary: dict[str, Any]) -> None:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.0f}"

    print("\n| canceller | echo | onset | lost | error | over no echo (mean / max) | pause p50 / max (ms) |")
    print("|---|---|---|---|---|---|---|")
    for r in summary["cells"]:
        db = "none" if r["echo_db"] is None else f"{r['echo_db']:g} dB"
        over = (
            "-"
            if r["error_over_no_echo"] is None
            else f"{r['error_over_no_echo']:+.3f} / {r['error_over_no_echo_max']:+.3f}"
        )
        print(
            f"| {r['canceller']} | {db} | {r['onset_s']:.1f} s | {r['lost']}/{r['runs']} | {r['error_mean']:.3f} | "
            f"{over} | {ms(r['pause_p50_s'])} / {ms(r['pause_max_s'])} |"
        )
    print("\n| canceller, echo | false barge-ins from the echo alone |\n|---|---|")
    for key, n in summary["false_barge_ins"].items():
        print(f"| {key} dB | {n} |")


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cancellers = sorted({r["canceller"] for r in summary["cells"]})
    fig, axes = plt.subplots(2, len(cancellers), figsize=(4.2 * len(cancellers), 6.5), squeeze=False)
    for j, canceller in enumerate(cancellers):
        rows = [r for r in summary["cells"] if r["canceller"] == canceller]
        dbs = sorted({r["echo_db"] for r in rows}, key=_db)
        onsets = sorted({r["onset_s"] for r in rows})
        for i, (field, title, vmax) in enumerate((("lost", "lost", None), ("error_mean", "error rate", 1.0))):
            grid = np.full((len(dbs), len(onsets)), np.nan)
            for r in rows:
                grid[dbs.index(r["echo_db"]), onsets.index(r["onset_s"])] = r[field]
            ax = axes[i][j]
            im = ax.imshow(grid, aspect="auto", cmap="Reds", vmin=0, vmax=vmax or max(1, np.nanmax(grid)))
            ax.set_xticks(range(len(onsets)), [f"{o:.1f}" for o in onsets], fontsize=7)
            ax.set_yticks(range(len(dbs)), ["none" if d is None else f"{d:g}" for d in dbs])
            ax.set_title(f"{canceller}: {title}", fontsize=9)
            ax.set_xlabel("onset into the reply (s)", fontsize=8)
            ax.set_ylabel("echo (dB)", fontsize=8)
            fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def run_grid(engines: Engines, args: argparse.Namespace) -> dict[str, Any]:
    speakers = [SPEAKERS[name] for name in args.speakers]
    cells: list[dict[str, Any]] = []
    echo_rows: list[dict[str, Any]] = []
    began = time.monotonic()
    for speaker in speakers:
        start = await reply_start(engines, speaker)
        print(f"{speaker.name}: the reply starts at {start[0]:.2f} s", file=sys.stderr)
        for canceller in args.cancellers:
            for db in args.echo:
                if db is not None:
                    echo_rows.append(await echo_only(engines, speaker, canceller, db))
                for onset in args.onsets:
                    cells.append(await one_cell(engines, speaker, canceller, db, onset, start))
                    c = cells[-1]
                    print(
                        f"{speaker.name} {canceller} {db} {onset:.1f}: error {c['error']} pause {c['pause_s']} "
                        f"heard {c['heard']!r} ({time.monotonic() - began:.0f} s)",
                        file=sys.stderr,
                    )
    summary = summarize(cells, echo_rows)
    return {"mode": "virtual time", "speakers": [dataclasses.asdict(s) for s in speakers], "summary": summary,
            "cells": cells, "echo_only": echo_rows}  # fmt: skip


async def main_grid(args: argparse.Namespace) -> None:
    from llm.base import GenerationConfig
    from shell.engines import EngineConfig, load_engines

    # Replies of 24 tokens (5-8 s of speech): longer than any onset, and less than half the work.
    generation = GenerationConfig(max_tokens=REPLY_TOKENS)
    languages = ("en", "ja") if "ja" in args.speakers else ("en",)
    engines = await asyncio.to_thread(load_engines, EngineConfig(languages=languages, generation=generation))
    try:
        result = await run_grid(engines, args)
    finally:
        await engines.aclose()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / args.json_name
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print_tables(result["summary"])
    plot(result["summary"], path.with_suffix(".png"))
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} and its plot")

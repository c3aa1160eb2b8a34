"""Other languages, as the pipeline hears them: Whisper's language identification and error rates.

    python -m voice.bench languages [--out DIR] [--repeats N]        (default: out/bench-languages, 3)

For every recording of ``tests/fixtures/languages`` (real speakers: es, fr, de, pt, ja, zh) and of
``tests/fixtures`` (English), each on its own as one utterance, Whisper base (the final pass)
transcribes it twice, one call after the other: detecting its language (``language="auto"``), and
held to the language it is in (for English, today's pipeline), each with the language's final
beam (``core/language.py``: greedy, but 5 for Japanese). Reports per language:

- language ID: the share of recordings whose detected language is right, overall and for
  those of 1.5 s or more (issue 33's target: 95%), and how sure Whisper was;
- the error rate of each way against the manifest's transcript: WER, and CER for Japanese and
  Chinese (``voice.bench.scoring.error_rate``);
- what detection costs: the median time of a call with detection over one held to the language
  (the same audio, calls interleaved, ``--repeats`` each).

Then the conversations (skipped with ``--no-conversations``): each recording said to the whole
pipeline on virtual time (real engines: Whisper, Smart Turn, Qwen2.5-Coder-0.5B, piper and
Kokoro), once with ``--language auto`` and once held to its language (``en`` for English: today's
pipeline, the same run). Per language: the person's error rate as the pipeline transcribed it,
the share of replies in the person's language (an independent Whisper pass, detecting, on the
reply's audio: what the person hears, the voice included), endpoint delay and voice-to-voice.
Then one conversation that switches language (English, Spanish, English: three real speakers'
recordings said in turn) with ``--language auto``: each turn's detected language and its reply's.
Last, what a default of ``auto`` would cost an English speaker in real time: the English
recordings replayed in real time as ``voice.run`` runs them with ``--language en`` (SmolLM2) and
with ``--language auto`` (which takes Qwen2.5-Coder-0.5B, the model that answers in other
languages), interleaved, ``--repeats`` times: voice-to-voice.

Prints Markdown tables and writes DIR/languages.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

from voice.bench.common import ROOT, parser

FIXTURES = ROOT / "tests" / "fixtures"
MIN_ID_S = 1.5  # issue 33: language identified right on 95% of utterances this long or longer


def recordings() -> list[tuple[Path, str, str]]:
    """(path, language, transcript) of every fixture recording, other languages first."""
    out = []
    for folder, default in ((FIXTURES / "languages", None), (FIXTURES, "en")):
        with (folder / "manifest.tsv").open(encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                out.append((folder / row["file"], row.get("language") or default, row["transcript"]))
    return out


# What the engines read as they load (set by `python -m voice.bench` before the import).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}
LLM = "qwen2.5-coder-0.5b"  # voice.run's model for languages other than English
SWITCH = ("jfk_inaugural_1961.wav", "es_fleurs_test_es006.wav", "ljspeech_LJ001-0002.wav")


def heard_in(asr, reply, rate: int) -> tuple[str | None, str]:
    """An independent Whisper pass over a reply's audio, detecting: its language and its words."""
    import numpy as np
    import soxr

    from core.audio import ASR_RATE

    audio = soxr.resample(reply, rate, ASR_RATE).astype(np.float32) if rate != ASR_RATE else reply
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    if not loud.size:
        return None, ""
    heard = asr.recognize(audio[max(0, loud[0] - 1600) : loud[-1] + 1600], language="auto")
    return heard.language, heard.text


async def converse(engines, asr, audio, setting: str, utterances=None) -> dict:
    """One conversation on virtual time, ``setting`` its --language: what the pipeline heard and
    said, each reply's language as Whisper hears its audio, and each turn's latencies."""
    from core.events import AsrFinal, Event, TtsChunk
    from core.language import LanguageConfig
    from shell.clock import VirtualClock
    from shell.config import SessionConfig
    from shell.session import Session
    from transport.replay import replay, replay_turns
    from voice.app.latency import turn_latencies

    events: list[Event] = []
    config = SessionConfig(language=LanguageConfig(language=setting))
    session = Session(engines, VirtualClock(), config, on_event=events.append, lockstep=True)
    try:
        if utterances is None:
            result = await replay(session, audio, settle=True)
        else:
            result = await replay_turns(session, utterances, settle=True)
    finally:
        await session.aclose()
    finals = [e for e in events if isinstance(e, AsrFinal) and e.text]
    chunks = [e for e in events if isinstance(e, TtsChunk)]
    replies = []
    for t in turn_latencies(events):
        # The reply's audio: from its first sample to the next reply's (or the end).
        start = round(t.speech_end + (t.voice_to_voice_s or 0.0), 3)
        replies.append((t, start))
    said = []
    for i, (t, start) in enumerate(replies):
        end = replies[i + 1][1] if i + 1 < len(replies) else result.duration_s
        part = result.reply[round(start * engines.output_rate) : round(end * engines.output_rate)]
        language, words = heard_in(asr, part, engines.output_rate)
        text = " ".join(c.text for c in chunks if c.response == t.response)
        said.append({"reply_language": language, "reply_heard": words, "reply_text": text,
                     "endpoint_ms": None if t.endpoint_s is None else round(1000 * t.endpoint_s),
                     "v2v_ms": None if t.voice_to_voice_s is None else round(1000 * t.voice_to_voice_s)})  # fmt: skip
    return {
        "heard": " ".join(e.text for e in finals),
        "languages": [e.language or "en" for e in finals],
        "turns": said,
    }


async def conversations(rows_in: list[tuple[Path, str, str]], repeats: int) -> dict:
    import asyncio

    from shell.engines import EngineConfig, load_engines
    from transport.files import load_audio
    from voice.bench.scoring import error_rate

    engines = await asyncio.to_thread(load_engines, EngineConfig(llm_model=LLM, languages=("en", "es", "ja")))
    asr = engines.asr_final
    rows = []
    for path, language, transcript in rows_in:
        audio = load_audio(path)
        for setting in ("auto", language):
            run = await converse(engines, asr, audio, setting)
            turns = run["turns"]
            rows.append({
                "file": path.name, "language": language, "setting": setting,
                "error": round(error_rate(transcript, run["heard"], language), 3),
                "detected": run["languages"],
                "replies": len(turns),
                "replies_in_language": sum(t["reply_language"] == language for t in turns),
                "endpoint_ms": [t["endpoint_ms"] for t in turns],
                "v2v_ms": [t["v2v_ms"] for t in turns],
                "turns": turns,
            })  # fmt: skip
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "turns"}, ensure_ascii=False),
                  file=sys.stderr, flush=True)  # fmt: skip
    by_name = {p.name: p for p, _, _ in rows_in}
    switch = await converse(engines, asr, None, "auto", [load_audio(by_name[name]) for name in SWITCH])
    real_time = await english_real_time(engines, [load_audio(p) for p, lang, _ in rows_in if lang == "en"], repeats)
    await engines.aclose()
    return {"rows": rows, "switch": {"recordings": list(SWITCH), **switch}, "english_real_time": real_time}


async def english_real_time(engines, audios: list, repeats: int) -> dict:
    """Voice-to-voice of English turns in real time: ``--language en`` as voice.run runs it
    (SmolLM2) against ``--language auto`` (Qwen), one after the other on each recording."""
    import asyncio
    import dataclasses

    from core.language import LanguageConfig
    from shell.config import SessionConfig
    from shell.engines import EngineConfig, make_llm
    from voice.bench.pipeline import streaming_run

    smollm = await asyncio.to_thread(make_llm, EngineConfig(llm_model="smollm2-135m"))
    ways = {"en (smollm2-135m)": (dataclasses.replace(engines, llm=smollm), "en"), f"auto ({LLM})": (engines, "auto")}
    v2v: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for audio in audios:
            for name, (eng, setting) in ways.items():
                config = SessionConfig(language=LanguageConfig(language=setting))
                turns, _ = await streaming_run(eng, audio, config)
                v2v[name] += [t["voice_to_voice_s"] for t in turns if t["voice_to_voice_s"] is not None]
    await smollm.close()
    return {
        name: {"turns": len(v), "v2v_ms_p50": round(1000 * statistics.median(v)) if v else None}
        for name, v in v2v.items()
    }


def conversation_summary(rows: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for language in dict.fromkeys(r["language"] for r in rows):
        for setting in ("auto", "held"):
            mine = [r for r in rows if r["language"] == language and (r["setting"] == "auto") == (setting == "auto")]
            v2v = [v for r in mine for v in r["v2v_ms"] if v is not None]
            endpoint = [v for r in mine for v in r["endpoint_ms"] if v is not None]
            out[f"{language} {setting}"] = {
                "error": round(statistics.mean(r["error"] for r in mine), 3),
                "replies": sum(r["replies"] for r in mine),
                "in_language": sum(r["replies_in_language"] for r in mine),
                "endpoint_ms_p50": statistics.median(endpoint) if endpoint else None,
                "v2v_ms_p50": statistics.median(v2v) if v2v else None,
            }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-languages")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-conversations", action="store_true", help="Whisper alone: no conversation on the pipeline")
    args = ap.parse_args(argv)

    import numpy as np

    from asr.whisper import WhisperRecognizer
    from core.audio import ASR_RATE
    from core.language import AUTO, among
    from core.language import language as language_rules
    from shell import models
    from transport.files import load_audio
    from voice.bench.scoring import error_rate

    asr = WhisperRecognizer(models.asr_model_path("base"), "cpu", cpu_threads=2)
    rows = []
    for path, language, transcript in recordings():
        audio = load_audio(path)
        beam = language_rules(language).final_beam  # as the pipeline's final pass, once it knows the language
        asr.recognize(audio, language=AUTO)  # warm-up: the first call of a shape costs more
        auto_s, held_s = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            auto = asr.recognize(audio, beam_size=beam, language=AUTO)
            auto_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            held = asr.recognize(audio, beam_size=beam, language=language)
            held_s.append(time.perf_counter() - t0)
        # Detection among the languages the agent can answer and speak (issue 45: a Mexican speaker was
        # Catalan to Whisper base), on the whole recording and on its first second (a short answer).
        within = asr.recognize(audio, beam_size=beam, language=AUTO, among=among(AUTO))
        onset = int(np.argmax(np.abs(audio) > 0.02))  # its first second of speech, not of silence
        first = audio[onset : onset + ASR_RATE]
        short_open = asr.recognize(first, language=AUTO)
        short_among = asr.recognize(first, language=AUTO, among=among(AUTO))
        rows.append({
            "file": path.name,
            "language": language,
            "duration_s": round(len(audio) / 16000, 2),
            "detected": auto.language,
            "probability": round(auto.language_probability or 0.0, 3),
            "error_auto": round(error_rate(transcript, auto.text, language), 3),
            "error_held": round(error_rate(transcript, held.text, language), 3),
            "auto_ms": round(1000 * statistics.median(auto_s), 1),
            "held_ms": round(1000 * statistics.median(held_s), 1),
            "text_auto": auto.text,
            "detected_among": within.language,
            "first_second_open": short_open.language,
            "first_second_among": short_among.language,
        })  # fmt: skip
        print(json.dumps(rows[-1], ensure_ascii=False), file=sys.stderr, flush=True)

    summary = {}
    for language in dict.fromkeys(r["language"] for r in rows):
        mine = [r for r in rows if r["language"] == language]
        long = [r for r in mine if r["duration_s"] >= MIN_ID_S]
        summary[language] = {
            "recordings": len(mine),
            "identified": sum(r["detected"] == language for r in mine),
            "identified_long": f"{sum(r['detected'] == language for r in long)}/{len(long)}",
            "probability_min": min(r["probability"] for r in mine),
            "error": "CER" if language in ("ja", "zh") else "WER",
            "error_auto": round(statistics.mean(r["error_auto"] for r in mine), 3),
            "error_held": round(statistics.mean(r["error_held"] for r in mine), 3),
            "detection_cost": round(statistics.median(r["auto_ms"] / r["held_ms"] for r in mine), 3),
            "identified_among": sum(r["detected_among"] == language for r in mine),
            "first_second_open": sum(r["first_second_open"] == language for r in mine),
            "first_second_among": sum(r["first_second_among"] == language for r in mine),
        }
    long = [r for r in rows if r["duration_s"] >= MIN_ID_S]
    result = {
        "model": "whisper base (int8, CPU, 2 threads)",
        "repeats": args.repeats,
        "identified_long_share": round(sum(r["detected"] == r["language"] for r in long) / len(long), 3),
        "summary": summary,
        "rows": rows,
    }
    del asr  # the conversations load the engines, Whisper among them
    if not args.no_conversations:
        import asyncio

        result["conversations"] = asyncio.run(conversations(recordings(), args.repeats))
        result["conversation_summary"] = conversation_summary(result["conversations"]["rows"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "languages.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")

    print(
        "| language | recordings | identified (1.5 s or more) | least sure | error | detecting | held "
        "| a call, detecting over held |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for language, s in summary.items():
        print(
            f"| {language} | {s['recordings']} | {s['identified_long']} | {s['probability_min']} | {s['error']} "
            f"| {s['error_auto']} | {s['error_held']} | x{s['detection_cost']} |"
        )
    print(f"\nidentified right (1.5 s or more): {result['identified_long_share']:.0%}")
    print("\n| language | among those it speaks | its first second, any language | its first second, among |")
    print("|---|---|---|---|")
    for language, s in summary.items():
        n = s["recordings"]
        print(
            f"| {language} | {s['identified_among']}/{n} | {s['first_second_open']}/{n}"
            f" | {s['first_second_among']}/{n} |"
        )
    if "conversation_summary" in result:
        print("\n| language, --language | error | replies in the language | endpoint p50 | voice-to-voice p50 |")
        print("|---|---|---|---|---|")
        for key, c in result["conversation_summary"].items():
            print(f"| {key} | {c['error']} | {c['in_language']}/{c['replies']} | {c['endpoint_ms_p50']} ms "
                  f"| {c['v2v_ms_p50']} ms |")  # fmt: skip
        for name, r in result["conversations"]["english_real_time"].items():
            print(f"English in real time, --language {name}: voice-to-voice p50 {r['v2v_ms_p50']} ms "
                  f"({r['turns']} turns)")  # fmt: skip
        switch = result["conversations"]["switch"]
        print(f"\nswitching conversation: heard {switch['languages']}, replies heard in "
              f"{[t['reply_language'] for t in switch['turns']]}")  # fmt: skip
    print(f"wrote {args.out}/languages.json")


if __name__ == "__main__":
    main()

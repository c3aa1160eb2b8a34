"""Turn-taking in other languages, on real recordings: a pause inside a sentence, and the end.

    python -m voice.bench language_turns [--out DIR] [--pause-ms MS]     (default: out/bench-language-turns, 1000)

Each recording of ``tests/fixtures/languages`` (real speakers of es, fr, de, pt, ja, zh) is one
sentence or two. Whisper base's word timestamps (held to its language) place a pause inside it:
right after a continuation word of the language ("y", "et", "und", "e", "けど", "和": the lists
of ``core/language.py``) where the sentence has one inside it, else at the word boundary nearest
its middle, and ``--pause-ms`` of silence is inserted there. Each is replayed through the whole
pipeline on virtual time (Whisper, Smart Turn, the words read by Qwen2.5-Coder-0.5B; the language
held), three ways:

- ``lists``: as shipped, the language's continuation words weigh a transcript that ends on one;
- ``no lists``: the same language with no lists (Smart Turn and the LLM's reading of the words
  alone: the rule that needs no lists);
- ``as said``: the recording without the pause, with the lists.

Per recording and way: whether the turn was cut at the pause (an endpoint there), cut anywhere
before its end, and the endpoint delay at its end (``voice.bench.turns``). Prints a Markdown
table and writes DIR/language_turns.json.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from voice.bench.common import ROOT, parser

ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}
LLM = "qwen2.5-coder-0.5b"


def pause_point(words, language) -> tuple[float, str]:
    """Where to pause (seconds) and why: after a continuation word inside the sentence, else mid-way."""
    from core.words import letters

    inside = range(1, len(words) - 2)  # not after the first word, nor before the last
    after_word = [i for i in inside if letters(words[i].text) in language.continuation_words]
    if after_word:
        mid = (words[0].start + words[-1].end) / 2
        i = min(after_word, key=lambda k: abs(words[k].end - mid))
        return (words[i].end + words[i + 1].start) / 2, f"after {words[i].text.strip()!r}"
    mid = (words[0].start + words[-1].end) / 2
    i = min(inside, key=lambda k: abs((words[k].end + words[k + 1].start) / 2 - mid))
    return (words[i].end + words[i + 1].start) / 2, f"mid-way, after {words[i].text.strip()!r}"


async def measure(pause_s: float) -> list[dict]:
    import core.language as languages
    from core.language import LanguageConfig
    from shell.config import SessionConfig
    from shell.engines import EngineConfig, load_engines
    from transport.files import load_audio
    from voice.bench.fixtures import Word, with_silence
    from voice.bench.languages import recordings
    from voice.bench.turns import run_turns

    engines = await asyncio.to_thread(load_engines, EngineConfig(llm_model=LLM, languages=("es", "ja")))
    rows = []
    for path, code, _ in recordings():
        if code == "en":
            continue  # English: python -m voice.bench endpoint
        audio = load_audio(path)
        segments, _ = engines.asr_final.model.transcribe(audio, language=code, beam_size=1, word_timestamps=True)
        words = [Word(w.word, w.start, w.end) for s in segments for w in s.words]
        if len(words) < 4:
            continue
        shipped = languages.LANGUAGES[code]
        at_s, where = pause_point(words, shipped)
        paused = with_silence(audio, at_s, pause_s)
        config = SessionConfig(language=LanguageConfig(language=code))
        row: dict = {"file": path.name, "language": code, "pause_at_s": round(at_s, 2), "where": where}
        ways = {"lists": (paused, shipped), "no lists": (paused, None), "as said": (audio, shipped)}
        for way, (heard, rules) in ways.items():
            # The rule that needs no lists: the same language with empty ones (for this run only).
            languages.LANGUAGES[code] = rules or dataclasses.replace(
                shipped, continuation_words=frozenset(), backchannels=frozenset(), stop_words=frozenset()
            )
            try:
                run = await run_turns(engines, heard, config)
            finally:
                languages.LANGUAGES[code] = shipped
            # Where the speech ends (these recordings have a second or more of silence after it).
            speech_end = words[-1].end + (0.0 if way == "as said" else pause_s)
            row[way] = {
                "cut_at_pause": way != "as said" and run.cut_at(at_s, pause_s),
                "cut": any(e.end < speech_end - 0.5 for e in run.endpoints),
                "endpoint_ms": round(1000 * run.endpoint_delay_s) if run.endpoints else None,
                "turns": len(run.endpoints),
            }
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), file=sys.stderr, flush=True)
    await engines.aclose()
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-language-turns")
    ap.add_argument("--pause-ms", type=int, default=1000)
    args = ap.parse_args(argv)
    rows = asyncio.run(measure(args.pause_ms / 1000))
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"pause_ms": args.pause_ms, "model": LLM, "rows": rows}
    (args.out / "language_turns.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print("| recording | pause | lists: cut at it / anywhere | no lists: the same | endpoint (lists, as said) |")
    print("|---|---|---|---|---|")
    for r in rows:
        lists, none, said = r["lists"], r["no lists"], r["as said"]
        name = r["file"].removesuffix(".wav")
        print(
            f"| {name} | {r['where']} | {_yes(lists['cut_at_pause'])} / {_yes(lists['cut'])} "
            f"| {_yes(none['cut_at_pause'])} / {_yes(none['cut'])} | {lists['endpoint_ms']}, {said['endpoint_ms']} ms |"
        )
    for way in ("lists", "no lists"):
        cut = sum(r[way]["cut_at_pause"] for r in rows)
        print(f"{way}: cut at the pause {cut} of {len(rows)}")
    print(f"as said: cut {sum(r['as said']['cut'] for r in rows)} of {len(rows)}")
    print(f"wrote {args.out}/language_turns.json")


def _yes(flag: bool) -> str:
    return "cut" if flag else "whole"


if __name__ == "__main__":
    main()

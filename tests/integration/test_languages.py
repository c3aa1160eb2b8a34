"""Other languages on the real engines (issue 33): Whisper base names the language of each
recording of tests/fixtures/languages (real speakers) and transcribes it in that language."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest
import pytest_asyncio
import soxr

from core.audio import ASR_RATE
from core.events import AsrFinal, Truncate, TtsChunk
from core.language import LanguageConfig
from core.words import join_words, unspaced
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.engines import Engines
from shell.session import Session
from tests.conftest import FIXTURES
from tests.integration.conftest import run_replay
from transport.client import talk
from transport.files import load_audio
from transport.replay import replay_turns
from voice.bench.scoring import error_rate

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

LANGUAGE_FIXTURES = FIXTURES / "languages"
RECORDINGS = list(csv.DictReader((LANGUAGE_FIXTURES / "manifest.tsv").open(encoding="utf-8"), delimiter="\t"))


def test_the_fixtures_cover_six_languages_with_their_transcripts():
    assert {r["language"] for r in RECORDINGS} == {"es", "fr", "de", "pt", "ja", "zh"}
    assert all(r["transcript"] and (LANGUAGE_FIXTURES / r["file"]).exists() for r in RECORDINGS)


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r["file"].removesuffix(".wav") for r in RECORDINGS])
async def test_whisper_detects_the_language_and_transcribes_in_it(engines, recording):
    audio = load_audio(LANGUAGE_FIXTURES / recording["file"])
    heard = engines.asr_final.recognize(audio, language="auto")
    assert heard.language == recording["language"]
    assert heard.language_probability is not None and heard.language_probability >= 0.9
    # Not a translation into English: the words are the language's (FLEURS's read sentences are
    # hard; the benchmark reports the rates, this bounds each one loosely).
    # pt002 begins with a racing driver's name ("giancarlo fisichella", 2 of its 15 words) and ends
    # "logo após a largada", which Whisper base hears as "no Japão Salargado" on some CPUs: 0.53 on
    # one 2-core x86_64 machine, under 0.4 on another, the same model and audio.
    limit = 0.6 if recording["file"] == "pt_fleurs_test_pt002.wav" else 0.4
    assert error_rate(recording["transcript"], heard.text, recording["language"]) <= limit, heard.text


async def test_a_held_language_is_not_detected(engines):
    (es,) = [r for r in RECORDINGS if r["file"] == "es_fleurs_test_es006.wav"]
    heard = engines.asr_final.recognize(load_audio(LANGUAGE_FIXTURES / es["file"]))  # the default: English
    assert heard.language == "en" and heard.language_probability is None


async def test_a_spanish_turn_is_heard_as_spanish_and_the_model_asked_in_spanish(engines, replay_run):
    """`--language auto` on the real engines, virtual time: the turn, its event and the stored
    turn carry Spanish, and the model is told to answer in it (the embedded default model here
    is SmolLM2; `voice.run` takes Qwen for other languages, which answers in Spanish)."""
    config = SessionConfig(language=LanguageConfig(language="auto"))
    run = await replay_run(engines, LANGUAGE_FIXTURES / "es_fleurs_test_es006.wav", config=config)
    assert run.errors == []
    (final,) = [e for e in run.of(AsrFinal) if e.text]
    assert final.language == "es"
    assert error_rate("los luchadores compañeros de luna también le rindieron homenaje", final.text, "es") <= 0.2
    (user,) = [t for t in run.transcript if t["role"] == "user"]
    assert user["language"] == "es"
    assert [t["role"] for t in run.transcript] == ["user", "assistant"]


async def test_a_client_that_says_its_language_is_auto_gets_transcripts_in_spanish(voice_server):
    """Our protocol, real time: ``hello`` with ``"language": "auto"``; ``transcript_final`` says es."""
    result = await talk(
        voice_server.ws_url, load_audio(LANGUAGE_FIXTURES / "es_fleurs_test_es006.wav"), language="auto"
    )
    finals = [e for e in result.of("transcript_final") if e["text"]]
    assert finals and all(e["language"] == "es" for e in finals), finals


@pytest_asyncio.fixture(loop_scope="session")
async def with_qwen(engines, qwen) -> Engines:
    return dataclasses.replace(engines, llm=qwen)  # the shared engines, the model that answers in Japanese


JAPANESE = SessionConfig(language=LanguageConfig(language="ja"))


def heard_language(engines: Engines, run) -> tuple[str | None, str]:
    """What an independent Whisper pass hears in the reply's audio: its language and its words."""
    audio = soxr.resample(run.reply, run.rate, ASR_RATE).astype(np.float32)
    heard = engines.asr_final.recognize(audio, language="auto")
    return heard.language, heard.text


async def test_a_japanese_speaker_is_answered_in_japanese_by_a_japanese_voice(with_qwen):
    """Issue 33's end to end: a real Japanese speaker, Whisper held to Japanese, Qwen answering,
    Kokoro's native voice speaking; Whisper hears the reply's audio as Japanese."""
    run = await run_replay(with_qwen, LANGUAGE_FIXTURES / "ja_commonvoice_38843402.wav", config=JAPANESE)
    assert run.errors == []
    finals = [e for e in run.of(AsrFinal) if e.text]
    assert finals and all(e.language == "ja" for e in finals)
    replies = [t["text"] for t in run.transcript if t["role"] == "assistant"]
    assert replies and all(any(unspaced(c) for c in reply) for reply in replies), replies
    assert with_qwen.voices.choice("ja").voice == "jf_alpha"
    language, words = heard_language(with_qwen, run)
    assert language == "ja", words


async def test_a_barge_in_over_a_japanese_reply_keeps_the_characters_heard(with_qwen):
    """A Japanese question, then another speaker's sentence 1.2 s after it, over the reply: the
    reply is cut, and the stored turn keeps what was heard of it, character by character, no more."""
    question = load_audio(LANGUAGE_FIXTURES / "ja_commonvoice_38853932.wav")[: round(2.9 * ASR_RATE)]  # 1st sentence
    over = load_audio(LANGUAGE_FIXTURES / "ja_commonvoice_38843402.wav")
    audio = np.concatenate([question, np.zeros(round(1.2 * ASR_RATE), np.float32), over])
    run = await run_replay(with_qwen, audio, config=JAPANESE)
    assert run.errors == []
    (cut,) = run.of(Truncate)
    spoken = join_words([c.text for c in run.of(TtsChunk) if c.response == cut.response])
    assert cut.text and len(cut.text) < len(spoken) and spoken.startswith(cut.text), (cut.text, spoken)
    assert unspaced(cut.text[-1]) or cut.text[-1] in "、。！？「」"  # cut between characters, not after a space
    (stored,) = [t for t in run.transcript if t["role"] == "assistant" and t.get("interrupted")]
    assert stored["text"] == cut.text


SENTENCES = {
    "ja": "東京は日本の首都です。",
    "es": "Madrid es la capital.",
    "pt": "Lisboa é a capital.",
    "it": "Roma è la capitale.",
    "de": "Berlin ist die Hauptstadt.",
    "fr": "Paris est la capitale.",
    "zh": "北京是中国的首都。",
}


@pytest.mark.parametrize("language", list(SENTENCES))
async def test_the_voice_of_each_language_speaks_it(engines, language):
    """Every language with a bundled voice (core/voices.py) is spoken: audio, and words timed in it."""
    text = SENTENCES[language]
    (piece,) = list(engines.voices.speaking(language).synthesize(text))
    assert len(piece.audio) > engines.output_rate // 2 and float(np.max(np.abs(piece.audio))) > 0.1
    ends = [w.end for w in piece.words]
    assert join_words([w.text for w in piece.words]) == text and ends == sorted(ends) and 0 < ends[0] < ends[-1]


async def test_a_spanish_turn_is_answered_with_spanish_audio(with_qwen):
    """Held to Spanish: Qwen answers, Kokoro's jm_kumo speaks it, and an independent Whisper pass
    over the reply's audio hears Spanish."""
    config = SessionConfig(language=LanguageConfig(language="es"))
    run = await run_replay(with_qwen, LANGUAGE_FIXTURES / "es_fleurs_test_es006.wav", config=config)
    assert run.errors == []
    assert with_qwen.voices.choice("es").voice == "jm_kumo"
    language, words = heard_language(with_qwen, run)
    assert language == "es", words


class Recorder:
    """The real model, with the messages of each request kept."""

    def __init__(self, llm) -> None:
        self.llm, self.name, self.requests = llm, llm.name, []

    def stream(self, messages, request_id, tools=None):
        self.requests.append(messages)
        return self.llm.stream(messages, request_id, tools=tools)

    async def next_token_probabilities(self, text, k=20):
        return await self.llm.next_token_probabilities(text, k)

    async def close(self) -> None:
        pass


async def test_a_conversation_that_switches_to_spanish_and_back_follows_the_person(engines):
    """English, Spanish, English (three real speakers, said in turn), `--language auto`: each
    turn is heard in its language, the model is told Spanish for the Spanish one only, and each
    reply is given to the voice of its language (the default model here answers in English: its
    English text goes to the English voice)."""
    said = [
        load_audio(FIXTURES / "ljspeech_LJ001-0002.wav"),
        load_audio(LANGUAGE_FIXTURES / "es_fleurs_test_es006.wav"),
        load_audio(FIXTURES / "cmu_arctic_us_axb_a0004.wav"),
    ]
    events: list = []
    config = SessionConfig(language=LanguageConfig(language="auto"))
    recorder = Recorder(engines.llm)
    session = Session(dataclasses.replace(engines, llm=recorder), VirtualClock(), config, events.append, lockstep=True)
    try:
        await replay_turns(session, said, settle=True)
    finally:
        await session.aclose()
    assert session.errors == []
    finals = [e for e in events if isinstance(e, AsrFinal) and e.text]
    assert [e.language or "en" for e in finals] == ["en", "es", "en"]
    # Each request (a speculative one too) is told Spanish when it answers the Spanish words only.
    spanish = finals[1].text
    told = {(r[-1]["content"] == spanish, "speaks Spanish" in r[0]["content"]) for r in recorder.requests}
    assert told == {(True, True), (False, False)}
    assert [t.get("language", "en") for t in session.history.to_json() if t["role"] == "user"] == ["en", "es", "en"]

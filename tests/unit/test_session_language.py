"""The language of a conversation through a session (issue 33), on stand-in engines and
virtual time: what Whisper is asked for, what the events and the stored turns carry, what the
model is told. The engines are stand-ins (``stand_in_engines.py``): the logic is under test."""

from __future__ import annotations

import numpy as np
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from test_session import of, run

from core.events import AsrFinal
from core.language import LanguageConfig
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.session import Session

SPANISH_HZ, ENGLISH_HZ, SHORT_HZ = 300, 700, 1100
WORDS = {SPANISH_HZ: "¿Qué hora es ahora mismo?", ENGLISH_HZ: "What time is it now?", SHORT_HZ: "Sí."}
# Whisper's guesses: sure of the long ones, not of "Sí." (base took it for Portuguese)
LANGUAGES = {WORDS[SPANISH_HZ]: ("es", 0.98), WORDS[ENGLISH_HZ]: ("en", 0.95), WORDS[SHORT_HZ]: ("pt", 0.6)}


def session(language: str, partials: bool = False) -> tuple[Session, StandInEngines]:
    asr = StandInRecognizer(WORDS, LANGUAGES)
    engines = StandInEngines(
        asr,
        StandInLLM(["Son las doce.", "It is noon.", "Bien."]),
        asr_partial=StandInRecognizer(WORDS) if partials else None,
    )
    cfg = SessionConfig(echo_cancel=False, end_of_turn=None, language=LanguageConfig(language=language))
    events: list = []
    s = Session(engines, VirtualClock(), cfg, events.append, lockstep=True)  # type: ignore[arg-type]
    s.events = events  # type: ignore[attr-defined]
    return s, engines


def turns(*hz: tuple[int, float]) -> np.ndarray:
    """Utterances (a tone's pitch, its length) each followed by time for its reply."""
    return np.concatenate([part for f, seconds in hz for part in (silence(0.5), tone(seconds, hz=f), silence(4.0))])


async def test_held_to_english_nothing_changes():
    s, engines = session("en")
    await run(s, turns((ENGLISH_HZ, 1.6)))
    (final,) = of(s, AsrFinal)
    assert final.language is None and "language" not in final.to_json()
    assert "speaks" not in engines.llm.requests[0][0]["content"]
    assert {lang for lang in engines.asr_final.languages_asked} == {"en"}
    assert "language" not in s.history.turns[0].to_json()


async def test_a_spanish_turn_is_detected_stored_and_answered_in_spanish():
    s, engines = session("auto")
    await run(s, turns((SPANISH_HZ, 1.6)))
    (final,) = of(s, AsrFinal)
    assert final.language == "es"
    assert "auto" in engines.asr_final.languages_asked
    system = engines.llm.requests[-1][0]["content"]
    assert system.endswith("The person speaks Spanish: always answer in Spanish.")
    assert s.history.turns[0].to_json()["language"] == "es"


async def test_the_reply_follows_the_last_utterance_and_a_short_one_keeps_the_language():
    s, engines = session("auto")
    await run(s, turns((SPANISH_HZ, 1.6), (SHORT_HZ, 0.6), (ENGLISH_HZ, 1.6)))
    assert [f.language for f in of(s, AsrFinal)] == ["es", "es", "en"]  # "Sí." is not taken for Portuguese
    systems = [r[0]["content"] for r in engines.llm.requests]
    assert "Spanish" in systems[0] and "Spanish" in systems[-2] and "speaks" not in systems[-1]


async def test_a_fixed_language_holds_every_pass_and_tells_the_model():
    s, engines = session("es")
    await run(s, turns((SPANISH_HZ, 1.6)))
    assert set(engines.asr_final.languages_asked) == {"es"}
    assert of(s, AsrFinal)[0].language == "es"
    assert "Spanish" in engines.llm.requests[-1][0]["content"]


async def test_an_english_only_partial_model_is_not_asked_to_hear_another_language():
    one, engines_one = session("auto", partials=True)
    await run(one, turns((SPANISH_HZ, 1.6)))
    two, engines_two = session("auto", partials=True)
    await run(two, turns((SPANISH_HZ, 1.6), (SPANISH_HZ, 1.6)))
    # The first utterance is heard before its language is known; once it is Spanish, no partials.
    assert engines_one.asr_partial.calls and len(engines_two.asr_partial.calls) == len(engines_one.asr_partial.calls)
    assert [f.language for f in of(two, AsrFinal)] == ["es", "es"]


async def test_each_reply_is_spoken_by_the_voice_of_its_language():
    s, engines = session("auto")
    await run(s, turns((SPANISH_HZ, 1.6), (ENGLISH_HZ, 1.6)))
    spoken = engines.voices.languages
    assert spoken and spoken[0] == "es" and spoken[-1] == "en"  # the voice follows the conversation


async def test_a_multilingual_partial_model_hears_the_conversations_language():
    asr = StandInRecognizer(WORDS, LANGUAGES)
    engines = StandInEngines(asr, StandInLLM(["Son las doce."]), asr_partial=StandInRecognizer(WORDS, LANGUAGES))
    cfg = SessionConfig(echo_cancel=False, end_of_turn=None, language=LanguageConfig(language="es"))
    s = Session(engines, VirtualClock(), cfg, lambda e: None, lockstep=True)  # type: ignore[arg-type]
    await run(s, turns((SPANISH_HZ, 1.6)))
    assert engines.asr_partial.calls and set(engines.asr_partial.languages_asked) == {"es"}

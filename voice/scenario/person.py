"""The person's side of a scenario: each turn's audio, at 16 kHz, before it is fed.

A text turn is said by the person's voice (not the assistant's: joe slower, or a Kokoro voice),
exactly (no sampling noise, so the same text is the same samples on every run), with its peak at the
person's level. A recording is used as it is. Then a pause goes in after a word (the voice's own word
timings, or Whisper's for a recording) and sounds are mixed in: a noise under all of it at an SNR, a
cough at a time. Where the speech starts and ends is read from the result, so a turn's expectations
are timed from the person's real speech, not from the file's edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import soxr

from core.audio import ASR_RATE
from core.words import letters
from shell.voices import Voice
from transport.files import load_audio
from voice.scenario.spec import Mix, Person, ScenarioError, Turn

# Word end times (seconds) of a recording, as Whisper hears them: (word, end_s).
WordTimes = Callable[[np.ndarray, str], list[tuple[str, float]]]

FRAME = ASR_RATE // 100  # 10 ms, for where speech starts and ends
SPEECH_FLOOR_DB = 40.0  # a frame within this of the loudest is sound, not silence
KEY_GAP_S = 0.4  # a person pressing keys one after another


@dataclass(frozen=True)
class TurnAudio:
    """A turn's audio (16 kHz float32) and where its sound starts and ends in it (seconds)."""

    audio: np.ndarray
    speech_start: float
    speech_end: float
    keys: tuple[tuple[float, str], ...] = ()  # keys pressed, each (seconds into the turn, key): silence meanwhile

    @property
    def duration(self) -> float:
        return len(self.audio) / ASR_RATE


def render(
    turn: Turn, person: Person, voice: Callable[[], Voice], output_rate: int, word_times: WordTimes
) -> TurnAudio:
    """``turn``'s audio: said by ``voice()`` (the person's, made on first use) or loaded, paused, mixed;
    a keypad turn is silence while its keys are pressed, KEY_GAP_S apart."""
    if turn.keys is not None:
        duration = len(turn.keys) * KEY_GAP_S
        silence = np.zeros(round(duration * ASR_RATE), np.float32)
        return TurnAudio(silence, 0.0, duration, tuple((i * KEY_GAP_S, k) for i, k in enumerate(turn.keys)))
    if turn.text is not None:
        audio, ends = _said(turn.text, voice(), output_rate)
        audio = at_peak(audio, person.db if turn.db is None else turn.db)
    else:
        assert turn.audio is not None
        audio = load_audio(turn.audio)
        ends = None
        if turn.db is not None:
            audio = at_peak(audio, turn.db)
    if turn.pause is not None:
        if ends is None:
            ends = word_times(audio, person.language)
        audio = _paused(audio, ends, turn.pause.after, turn.pause.seconds, turn.label)
    start, end = sound_span(audio)
    for mix in turn.mix:
        audio = _mixed(audio, mix, (start, end))
    return TurnAudio(audio.astype(np.float32), start, end)


def _said(text: str, voice: Voice, output_rate: int) -> tuple[np.ndarray, list[tuple[str, float]]]:
    """The voice saying ``text`` at 16 kHz, and where each word ends (seconds)."""
    parts: list[np.ndarray] = []
    ends: list[tuple[str, float]] = []
    offset = 0
    for piece in voice.synthesize(text, exact=True):
        ends += [(w.text, (offset + w.end) / output_rate) for w in piece.words]
        parts.append(piece.audio)
        offset += len(piece.audio)
    if not parts:
        raise ScenarioError(f'"{text}": the person\'s voice says nothing for it')
    audio = np.concatenate(parts)
    if output_rate != ASR_RATE:
        audio = soxr.resample(audio, output_rate, ASR_RATE).astype(np.float32)
    return audio, ends


def at_peak(audio: np.ndarray, db: float) -> np.ndarray:
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    return audio * (10 ** (db / 20) / peak) if peak > 1e-8 else audio


def _paused(audio: np.ndarray, ends: list[tuple[str, float]], after: str, seconds: float, label: str) -> np.ndarray:
    want = letters(after)
    for word, end in ends:
        if letters(word) == want:
            at = min(len(audio), round(end * ASR_RATE))
            return np.concatenate([audio[:at], np.zeros(round(seconds * ASR_RATE), np.float32), audio[at:]])
    said = " ".join(w for w, _ in ends)
    raise ScenarioError(f"{label}: no word {after!r} to pause after (the words: {said})")


def sound_span(audio: np.ndarray) -> tuple[float, float]:
    """Where the sound in ``audio`` starts and ends (seconds): the first and last 10 ms within
    SPEECH_FLOOR_DB of the loudest."""
    n = len(audio) // FRAME
    if n == 0:
        return 0.0, len(audio) / ASR_RATE
    power = np.mean(audio[: n * FRAME].reshape(n, FRAME).astype(np.float64) ** 2, axis=1)
    loud = np.flatnonzero(10 * np.log10(power + 1e-12) > 10 * np.log10(power.max() + 1e-12) - SPEECH_FLOOR_DB)
    return float(loud[0] * FRAME / ASR_RATE), float((loud[-1] + 1) * FRAME / ASR_RATE)


def _mixed(audio: np.ndarray, mix: Mix, speech: tuple[float, float]) -> np.ndarray:
    sound = load_audio(mix.path)
    if mix.at is None:  # under the whole turn, looped
        sound = np.resize(sound, len(audio))
        at = 0
    else:
        at = round(mix.at * ASR_RATE)
    if mix.db is not None:
        sound = at_peak(sound, mix.db)
    else:
        assert mix.snr_db is not None
        a, b = (round(s * ASR_RATE) for s in speech)
        speech_rms = float(np.sqrt(np.mean(audio[a:b].astype(np.float64) ** 2))) if b > a else 0.0
        sound_rms = float(np.sqrt(np.mean(sound.astype(np.float64) ** 2))) or 1.0
        sound = sound * (speech_rms / sound_rms / 10 ** (mix.snr_db / 20))
    out = np.zeros(max(len(audio), at + len(sound)), dtype=np.float32)
    out[: len(audio)] = audio
    out[at : at + len(sound)] += sound
    return out


def room_audio(mix: Mix, turns: list[TurnAudio]) -> np.ndarray:
    """The room's sound at its level, to loop under the whole conversation: ``snr_db`` under the
    person's speech (its mean power over every turn's sound), or its peak at ``db`` dBFS."""
    sound = load_audio(mix.path)
    if mix.db is not None:
        return at_peak(sound, mix.db).astype(np.float32)
    assert mix.snr_db is not None
    spans = [t.audio[round(t.speech_start * ASR_RATE) : round(t.speech_end * ASR_RATE)] for t in turns]
    speech = np.concatenate(spans).astype(np.float64) if spans else np.zeros(0)
    speech_rms = float(np.sqrt(np.mean(speech**2))) if len(speech) else 0.0
    sound_rms = float(np.sqrt(np.mean(sound.astype(np.float64) ** 2))) or 1.0
    return (sound * (speech_rms / sound_rms / 10 ** (mix.snr_db / 20))).astype(np.float32)

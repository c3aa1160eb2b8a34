"""Hearing: the microphone's audio through the echo cancellers to the hearing front end, and the Whisper passes.

Each block of microphone audio has the assistant's own voice removed (AEC3 for
the VAD; for the ASR, with ``asr_audio="linear"``, the linear canceller, which
keeps the onset of speech over a reply) and goes to the pure hearing front end
(``core/hearing.py``), whose reports go on to the session. The Whisper
passes run here: partials (and the closing partial of a pause, which may start
the speculative reply), the check of speech over the reply, and the early and
final transcriptions of an utterance.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import numpy as np

from asr.echo import EchoCanceller, LinearEchoCanceller
from asr.whisper import Transcript
from core.commands import CheckInterruption, Command, TranscribeFinal
from core.events import AsrPartial, Event
from core.hearing import Heard, Hearing, PartialDue
from core.language import AUTO, Detected
from core.partials import PartialPolicy
from core.turns import Conversation
from shell.clock import Clock
from shell.denoising import Denoise, Denoising
from shell.engines import Engines
from shell.heard_audio import HeardAudio
from shell.work import Serves, Shed, Work

# A preview partial that has waited this long for the partial model is dropped unrun: the next
# one is due after another interval of speech (core/partials.py), and its words are newer.
PARTIAL_SHED_S = 1.0

# A pause's transcript to the end-of-turn decision: (utterance, text, end, start the speculation).
Weigh = Callable[[int, str, float, Callable[[], None]], Awaitable[None]]


class Listening:
    """The microphone path and the Whisper passes of one session."""

    def __init__(
        self,
        engines: Engines,
        clock: Clock,
        conversation: Conversation,
        hearing: Hearing,
        audio: HeardAudio,
        work: Work,
        run: Callable[[list[Command]], None],
        emit: Callable[[Event], None],
        error: Callable[[str, str], None],
        weigh: Weigh,
        echo_cancel: bool,
        linear_for_asr: bool,
        final_tail_s: float,
        check_full_window: bool,
        denoising: Denoising | None = None,
    ) -> None:
        """``run``: carries out the core's commands; ``weigh``: a pause's transcript to the end of
        the turn; ``linear_for_asr``: the ASR hears the linear canceller's output (else AEC3's);
        ``check_full_window``: interruption checks over Whisper's full window (else the short one);
        ``denoising``: the noise suppressors, after the echo cancellers (None: off)."""
        self.engines = engines
        self.clock = clock
        self.conversation = conversation
        self.hearing = hearing
        if hearing.end_of_turn is not None:  # the end of the turn reads transcripts in the conversation's language
            hearing.end_of_turn.language = conversation.language
        self.audio = audio
        self._work = work
        self._run = run
        self._emit = emit
        self._error = error
        self._weigh = weigh
        self._final_tail_s = final_tail_s
        self._check_full_window = check_full_window
        self.aec = EchoCanceller() if echo_cancel else None
        self.asr_aec = LinearEchoCanceller() if echo_cancel and linear_for_asr else None
        self.denoising = denoising if denoising is not None else Denoising("off", for_asr=False, echo_cancel=False)
        self._tails: dict[str, np.ndarray] = {}

    def push(self, block: np.ndarray, far: np.ndarray | None, playing: bool) -> list[Heard]:
        """A block of microphone audio (``far``: what the speaker played over it; None: silence);
        ``playing``: reply audio is queued. Returns what the hearing front end reports."""
        raw = block
        if far is None:
            far = np.zeros(len(block), dtype=np.float32)
        asr = block
        if self.aec is not None:
            block = self._work.call(Serves.HEARING, self.aec.process, raw, far)
            # Both cancellers return the same whole 10 ms frames of the same input.
            linear = self.asr_aec
            asr = self._work.call(Serves.HEARING, linear.process, raw, far) if linear is not None else block
            raw = raw[: len(block)]
        unsuppressed = None
        if self.denoising.on or self._tails:
            unsuppressed = block
            raw, block, asr = self._work.call(Serves.HEARING, self._clean, raw, block, asr)
        self.audio.append(asr)
        return self.hearing.push(block, raw, far, playing=playing, unsuppressed=unsuppressed)

    def _clean(self, raw: np.ndarray, block: np.ndarray, asr: np.ndarray) -> tuple[np.ndarray, ...]:
        """The views cleaned (on the event loop's thread, as the cancellers run: ~0.8 ms of a core
        per view and 20 ms block, docs/bench/noise.md), after what suppressors that were turned off held back."""
        d = self.denoising
        tails, self._tails = self._tails, {}

        def clean(view: str, audio: np.ndarray) -> np.ndarray:
            out = d.clean(view, audio)
            return np.concatenate([tails[view], out]) if view in tails else out

        if self.aec is None:  # no canceller: one signal, the microphone's, cleaned once
            cleaned = clean("vad", raw)
            return cleaned, cleaned, cleaned if d.for_asr else asr
        return clean("raw", raw), clean("vad", block), clean("asr", asr)

    def set_denoise(self, kind: Denoise) -> None:
        """Noise suppression on or off mid-session (Realtime's session.update). The streams keep
        their length: what a suppressor that stops held back goes before the next block as silence."""
        self._tails = self.denoising.set(kind)

    # -- partials ----------------------------------------------------------------

    def partial(self, due: PartialDue) -> None:
        """A partial pass is due: it runs on the audio heard so far (not where an English-only
        model would hear another language: it would write English words that were never said)."""
        partial = self.engines.asr_partial
        if partial is not None and not partial.multilingual and self.conversation.language.current.code != "en":
            self.hearing.partial_finished(due.policy, None)
            return
        audio = self.audio.utterance(due.onset, self.audio.end)
        self._work.spawn(self._transcribe_partial(due.policy, audio, due.end, self.conversation.utterance))

    async def _transcribe_partial(
        self, policy: PartialPolicy, audio: np.ndarray, closes: float | None = None, utterance: int = 0
    ) -> None:
        """A partial pass; ``closes``: it is the closing pass of the pause after speech that ended
        there (of ``utterance``), whose words may start the speculative reply."""
        text: str | None = None
        # A closing pass decides (its words are read for the end of the turn); the others are a preview.
        serves, shed_after_s = (Serves.BACKGROUND, PARTIAL_SHED_S) if closes is None else (Serves.DECISION, None)
        try:
            text = await self._work.in_thread(
                serves,
                self.engines.partial_executor,
                # A multilingual partial model hears the conversation's language (tiny.en: English).
                functools.partial(self.engines.asr_partial.transcribe, language=self._language(detect=False)),
                audio,
                shed_after_s=shed_after_s,
            )
        except Shed:  # under load: a stale preview, not an error
            pass
        except Exception as e:  # a failed partial is only a missed preview
            self._error("asr_partial", repr(e))
        changed = self.hearing.partial_finished(policy, text)
        if changed is not None:
            stable, unstable = changed
            self._emit(AsrPartial(self.clock.now(), text=f"{stable} {unstable}".strip(), stable=stable))
        if closes is not None and text:

            def speculate() -> None:
                self._run(self.conversation.closing_partial(utterance, closes, text, self.clock.now()))

            # Its words are read for the end of the turn too: in real time they come 200-400 ms
            # before the early final's, and a "finished" from Smart Turn need not wait for that
            # pass. The early final's words, when they come before the endpoint, replace them.
            await self._weigh(utterance, text, closes, speculate)

    # -- speech over the reply, and the final transcription -------------------------

    def check_interruption(self, cmd: CheckInterruption) -> None:
        self._work.spawn(self._check_interruption(cmd))

    async def _check_interruption(self, cmd: CheckInterruption) -> None:
        audio = self.audio.over_reply(cmd.onset, cmd.t)
        recognize = functools.partial(
            self.engines.asr_final.recognize, full_window=self._check_full_window, language=self._language(detect=False)
        )
        try:
            heard = await self._work.in_thread(Serves.INTERRUPTION, self.engines.final_executor, recognize, audio)
        except Exception as e:  # undecided: the final transcript decides instead
            self._error("asr_check", repr(e))
            heard = Transcript("", 1.0)
        h = self.hearing
        self._run(
            self.conversation.interruption_checked(
                cmd.utterance, heard.text, self.clock.now(), heard.no_speech_prob, h.level.db, h.background.db
            )
        )

    def transcribe_final(self, cmd: TranscribeFinal) -> None:
        self._work.spawn(self._transcribe_final(cmd))

    async def _transcribe_final(self, cmd: TranscribeFinal) -> None:
        end = cmd.end + self._final_tail_s
        # Speech that began over a reply (checked over it, or still held), from where it began.
        began_over_reply = cmd.over_reply or self.audio.onset[0] == cmd.onset
        audio = self.audio.over_reply(cmd.onset, end) if began_over_reply else self.audio.utterance(cmd.onset, end)
        # Over the reply, Whisper's full window: on a short one it invents more words in noise, and
        # on speech that began over the reply (its echo's residual in its first words) it repeated a
        # sentence whole (issue 44: "God bless them. I hope I'll go on seeing them forever. God bless
        # them. I hope I'll", the full window heard it once).
        recognize = functools.partial(
            self.engines.asr_final.recognize,
            beam_size=self.conversation.language.current.final_beam,
            full_window=began_over_reply,
            language=self._language(detect=True),
            among=self.conversation.language.among,
            prompt=cmd.prompt or None,
        )
        try:
            heard = await self._work.in_thread(Serves.DECISION, self.engines.final_executor, recognize, audio)
        except Exception as e:
            if cmd.early:  # the endpoint's own pass runs instead, if the endpoint came
                self._error("asr_early_final", repr(e))
                self._run(self.conversation.early_failed(cmd.utterance, cmd.end))
                return
            # The utterance is reported, not silently dropped; the turn is not stored.
            self._error("asr_final", repr(e))
            heard = Transcript("", 1.0)
        if cmd.early:

            def speculate() -> None:
                self._run(
                    self.conversation.early_transcript(
                        cmd.utterance, cmd.end, heard.text, self.clock.now(), heard.no_speech_prob, _detected(heard)
                    )
                )

            await self._weigh(cmd.utterance, heard.text, cmd.end, speculate)
            return
        self._run(
            self.conversation.transcript_final(
                cmd.utterance,
                heard.text,
                cmd.onset,
                cmd.end,
                self.clock.now(),
                heard.no_speech_prob,
                _detected(heard),
            )
        )

    def _language(self, detect: bool) -> str:
        """What a Whisper pass is held to: the conversation's language, or ``"auto"`` where each
        utterance's is detected (``detect``: a final pass; a check over the reply keeps the
        conversation's, as the person's words over a reply are short)."""
        language = self.conversation.language
        return AUTO if detect and not language.fixed else language.current.code


def _detected(heard: Transcript) -> Detected | None:
    """The language Whisper detected (None: it was given one)."""
    if heard.language_probability is None:
        return None
    return Detected(heard.language, heard.language_probability)

"""The barge-in policy: whether speech heard over the reply is meant to take the floor.

When the VAD hears the first ~100 ms of voiced frames
while a reply is in flight, playback is paused at once, within one output
block; generation and synthesis go on. If those frames do not become speech
(the VAD's minimum, about 200 ms, keeps coughs and clicks out), the reply
resumes where it paused. Once speech is confirmed:

* every ``commit_s`` of speech, its words so far are checked (an ASR pass on
  the audio since the onset), and once the person is saying something (a
  stop word such as "stop" or "wait", or ``commit_words`` words that are not
  backchannels) it is a barge-in: the LLM request and synthesis are
  cancelled, the queued audio dropped, and the reply is stored cut to the
  words that were heard before the pause;
* at the end of the speech its final transcript decides the same way; no
  words, noise and backchannels ("uh-huh", "yeah", "okay", any single other
  word but a goodbye) resume the reply where it paused, and are not stored as a turn.
  A goodbye ("Goodbye.", "OK, bye") cuts the reply like a stop word (``core/goodbye.py``).

Speech that began before the reply made a sound is the person going on with their turn
("No, | at eight."): one word takes the floor (``went_on_words``), a number included.

Long noise that the VAD takes for speech (a kitchen, a passing car) keeps the
reply paused while it lasts, but never cuts it.

The interrupting utterance is transcribed from its onset, pre-roll included,
and answered as a new turn once it ends.

The rules are :class:`BargeInPolicy`'s (pure, on words and loudness); when they are asked is
:class:`~core.over_reply.OverReply`'s.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from core.goodbye import says_goodbye
from core.language import ENGLISH, Language
from core.phrases import without_phrases
from core.words import letters, words


@dataclass(frozen=True)
class BargeInPolicy:
    commit_s: float = 0.6  # speech this long during a reply is a barge-in without waiting for words
    commit_words: int = 2  # a short utterance with this many words (backchannels not counted) is a barge-in
    # Whisper's no-speech probability above which its words over the reply are
    # not believed: on noise and echo residual it invents words, but knows it.
    max_no_speech_prob: float = 0.5
    # Speech over the reply quieter than the person's own turns by more than
    # this is not the person at the microphone: background talk, a kitchen,
    # what the echo canceller left (whose words Whisper may still find).
    max_level_below_user_db: float = 10.0
    # ... or less than this above what the microphone hears while the assistant
    # talks and nobody speaks (noise and echo residual): words found in that
    # are most often the reply's own, garbled.
    min_level_above_background_db: float = 10.0
    # Speech over the reply whose words match a stretch of the reply this closely
    # (0-1, by letters) is the reply's own voice that the echo canceller let
    # through, transcribed with a slip or two ("lips as they both look at each
    # other" for "... looked at ..."): not the person, however loud.
    min_echo_similarity: float = 0.75
    # The reply's words that may lead the transcript of speech over it: those played in the
    # speech's pre-roll and until the pause (its onset minus this, on), which the canceller's
    # residual may have left under the person's first words.
    echo_lead_s: float = 1.0
    # Speech that began before the reply made a sound is the person going on with their turn
    # (the endpoint came at a breath: "No, | at eight."), neither a reaction to the reply nor its
    # echo: this many words take the floor, a number counted as a word. Two words, the rule for
    # speech over what was heard, left "At 8." over "What would you like to change?" a backchannel.
    # Closing words add nothing to the turn ("Yes, | thank you."): the reply plays on. Whisper's
    # doubt is not asked (it gave "At 8." 0.64); the levels are.
    went_on_words: int = 1
    # How late after the reply's first sample the speech may begin and still have gone on before it
    # made a sound: one VAD frame (the onset is counted in 32 ms frames); piper's first 29-55 ms are silent.
    went_on_s: float = 0.032

    def interrupts(
        self,
        text: str,
        reply: str = "",
        no_speech_prob: float = 0.0,
        level_db: float | None = None,
        user_level_db: float | None = None,
        background_db: float | None = None,
        language: Language = ENGLISH,
        went_on: bool = False,
    ) -> bool:
        """Whether speech heard over the reply is meant to take the floor.

        Words of the reply itself are not counted, nor words that repeat a
        stretch of it with a slip or two: what the echo canceller left of the
        assistant's own voice, transcribed, is not the person. Nor are words
        Whisper doubts, or speech much quieter than the person. A stop word
        the reply did not say is the person, whatever else was heard.
        ``language``: the one the words are in (its stop words and backchannels). ``went_on``:
        the speech began before the reply made a sound (``went_on_words`` are enough).
        """
        # Speech that went on is judged as a turn in silence is, by Whisper's own discard alone
        # (asr/whisper.py): it gave "At 8." a no-speech probability of 0.64.
        if no_speech_prob > self.max_no_speech_prob and not went_on:
            return False
        if (
            level_db is not None
            and user_level_db is not None
            and level_db < user_level_db - self.max_level_below_user_db
        ):
            return False
        if (
            level_db is not None
            and background_db is not None
            and level_db < background_db + self.min_level_above_background_db
        ):
            return False
        heard, said = tokens(text, language, numbers=went_on), tokens(reply, language)
        # Unspaced scripts: the reply's characters are too common to discount one by one.
        own = set(said) if language.spaced else set()
        if any(w in language.stop_words and w not in own for w in heard):
            return True
        # A goodbye ends the reply however short it is (where one other word is a backchannel),
        # unless the reply said it too: then it may be its own echo.
        if says_goodbye(text, language) and not says_goodbye(reply, language):
            return True
        if echo_similarity(heard, said) >= self.min_echo_similarity:
            return False
        if went_on:
            heard = tokens(without_phrases(text, language.closings, language, numbers=True)[0], language, numbers=True)
        needed = self.went_on_words if went_on else self.commit_words
        return sum(weight(w) for w in heard if w not in language.backchannels and w not in own) >= needed


def tokens(text: str, language: Language = ENGLISH, numbers: bool = False) -> list[str]:
    """``text`` as the barge-in rules count it: its words (digits not counted unless ``numbers``:
    Whisper's digits over the reply count for nothing); where words are not spaced, the language's
    stop words and backchannels where they stand, and every other character alone."""
    if language.spaced:
        return words(text, numbers=numbers)
    said = "".join(c for c in letters(text) if numbers or not c.isdigit())
    known = sorted(language.stop_words | language.backchannels | language.goodbyes, key=len, reverse=True)
    out: list[str] = []
    i = 0
    while i < len(said):
        word = next((k for k in known if said.startswith(k, i)), said[i])
        out.append(word)
        i += len(word)
    return out


def weight(token: str) -> float:
    """How many words ``token`` counts for: a word, or a lone character of an unspaced script
    (half a word: Japanese and Chinese words are mostly two characters)."""
    return 0.5 if len(token) == 1 and not token.isascii() else 1.0


def echo_similarity(heard: list[str], reply: list[str]) -> float:
    """How closely ``heard`` (two words or more) repeats some stretch of ``reply``: the best
    letter-by-letter match (difflib's ratio, 0-1) against its runs of as many words, one
    fewer or one more (Whisper drops and splits words). 0 for fewer than two words."""
    if len(heard) < 2 or not reply:
        return 0.0
    said = " ".join(heard)
    best = 0.0
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(said)  # difflib caches what it knows of the second sequence
    for n in {max(1, len(heard) - 1), len(heard), len(heard) + 1}:
        for i in range(max(1, len(reply) - n + 1)):
            matcher.set_seq1(" ".join(reply[i : i + n]))
            if matcher.real_quick_ratio() > best and matcher.quick_ratio() > best:
                best = max(best, matcher.ratio())
    return best


def without_echo_lead(text: str, recent: str, language: Language = ENGLISH, min_similarity: float = 0.75) -> str:
    """``text`` without a leading run that repeats a stretch of ``recent`` (the reply's words
    played just before and at the speech's onset; two words at least, or four characters of an
    unspaced script): at a loud echo, Whisper hears the canceller's residual of them before the
    person's own ("I'm sorry. God bless them..."). The run kept out is the one that matches best
    (the longer of equals); at least one word is left, as speech that is all echo is the
    policy's to judge (:meth:`BargeInPolicy.interrupts`)."""
    said = tokens(recent, language)
    if len(said) < 2:
        return text
    # Where the text may be cut: after each word, or after each character of an unspaced script.
    cuts = [m.end() for m in re.finditer(r"\S+", text)] if language.spaced else list(range(1, len(text) + 1))
    best, cut_at = min_similarity, 0
    for cut in cuts[:-1]:
        lead = tokens(text[:cut], language)
        if not tokens(text[cut:], language):
            break
        if sum(weight(w) for w in lead) < 2:  # two words, or four characters of an unspaced script
            continue
        if lead[0] not in said or lead[-1] not in said:  # a run of the reply's begins and ends with its words
            continue
        similarity = echo_similarity(lead, said)
        if similarity >= best:
            best, cut_at = similarity, cut
    return text[cut_at:].lstrip(" ,.;:!?-、。，！？") if cut_at else text

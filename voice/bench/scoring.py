"""Word error rate, normalised the way Whisper's authors score English; and in other languages,
as they score them (their basic normaliser), by characters where words are not spaced."""

from __future__ import annotations

from functools import cache


@cache
def _normalizer():
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def word_error_rate(reference: str, hypothesis: str) -> float:
    import jiwer

    norm = _normalizer()
    ref, hyp = norm(reference), norm(hypothesis)
    if not ref.strip():
        return 0.0 if not hyp.strip() else 1.0
    return float(jiwer.wer(ref, hyp))


@cache
def _basic():
    from whisper_normalizer.basic import BasicTextNormalizer

    return BasicTextNormalizer()


def error_rate(reference: str, hypothesis: str, language: str = "en") -> float:
    """WER of ``hypothesis`` in ``language``; for Japanese and Chinese (no spaces between words),
    the character error rate (CER), spaces and punctuation not counted."""
    import jiwer

    from core.language import language as lookup

    if language == "en":
        return word_error_rate(reference, hypothesis)
    ref, hyp = _basic()(reference), _basic()(hypothesis)
    if not lookup(language).spaced:
        ref, hyp = "".join(ref.split()), "".join(hyp.split())
        if not ref:
            return 0.0 if not hyp else 1.0
        return float(jiwer.cer(ref, hyp))
    if not ref.strip():
        return 0.0 if not hyp.strip() else 1.0
    return float(jiwer.wer(ref, hyp))

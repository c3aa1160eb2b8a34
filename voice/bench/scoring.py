"""Word error rate, normalised the way Whisper's authors score English."""

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

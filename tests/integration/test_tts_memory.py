"""piper gives back what its longest sentences needed (issue 14's memory target).

ONNX Runtime's default CPU arena keeps the peak of the longest sentence ever
spoken: on the bench's sentences (up to 8 s of speech) piper as shipped ends
188 MB over its first sentence, and a server's RSS grew that much over a
second conversation. The voice runs on our own arena with shrinkage
(tts/piper_tts.py); this runs the bench's probe of it, in a fresh process as
the bench does, since RSS is the process's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The arena keeps ~30 MB over the first sentence (docs/bench/tts_memory.json); piper's own, 188 MB.
KEPT_MB_AT_MOST = 80


@pytest.mark.engines
def test_piper_keeps_little_of_its_longest_sentences():
    out = subprocess.run(
        [sys.executable, "-m", "voice.bench", "tts_memory", "--probe", "arena"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    rss = probe["rss_mb"]
    assert probe["longest_sentence_s"] > 7  # the long ones were spoken
    assert max(rss) > rss[0]  # and needed more than the first
    assert rss[-1] - rss[0] <= KEPT_MB_AT_MOST, f"kept {rss[-1] - rss[0]:.0f} MB: {rss}"

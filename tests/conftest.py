"""Shared fixtures: the bundled recordings and their transcripts."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


@dataclass(frozen=True)
class Recording:
    path: Path
    transcript: str
    duration_s: float

    @property
    def name(self) -> str:
        return self.path.stem


def recordings() -> list[Recording]:
    with open(FIXTURES / "manifest.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [Recording(FIXTURES / r["file"], r["transcript"], float(r["duration_s"])) for r in rows]


@pytest.fixture(scope="session")
def all_recordings() -> list[Recording]:
    return recordings()

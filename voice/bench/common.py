"""What the benchmarks share: the repository's root, the bundled recordings, a free port, memory, the parser.

Percentiles are voice/app/latency.percentile (linear, as the latency reports use), imported where needed.
"""

from __future__ import annotations

import argparse
import csv
import socket
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# The larger set of recordings beside the checkout (those of tests/fixtures and more), where there is one.
SHARED = ROOT.parent / "shared" / "fixtures"
SHARED_SPEECH = SHARED / "speech"


@dataclass(frozen=True)
class Recording:
    path: Path
    transcript: str
    duration_s: float

    @property
    def name(self) -> str:
        return self.path.stem


def recordings() -> list[Recording]:
    """The bundled recordings of tests/fixtures/manifest.tsv, in its order."""
    with open(FIXTURES / "manifest.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [Recording(FIXTURES / r["file"], r["transcript"], float(r["duration_s"])) for r in rows]


def free_port() -> int:
    """A TCP port free on the loopback now (another process may take it before it is bound again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int | str = "self") -> float:
    """VmRSS of a process (this one by default) in MB, unrounded; RuntimeError if it has none."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def parser(module: str, **kwargs) -> argparse.ArgumentParser:
    """The options of the benchmark in ``module`` (its ``__name__``; a package's is its ``run`` module),
    shown as ``python -m voice.bench NAME``; ``kwargs`` go to :class:`argparse.ArgumentParser`."""
    name = module.removeprefix("voice.bench.").removesuffix(".run")
    return argparse.ArgumentParser(prog=f"python -m voice.bench {name}", **kwargs)


def nearest_rank(values: list[float | None], q: float) -> float | None:
    """The ``q`` quantile of ``values`` by nearest rank, rounded to 0.1, None values skipped; None if empty.

    What the fuzz report's figures have always used (voice/app/latency.percentile interpolates instead).
    """
    kept = sorted(v for v in values if v is not None)
    return round(kept[min(len(kept) - 1, int(q * len(kept)))], 1) if kept else None

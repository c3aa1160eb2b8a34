"""A ``python -m voice.run --serve`` process, as a person runs one, for the benchmarks and the deployment's tests.

In its own process group, so that a kill takes the engines' own processes with it (vLLM's outlive a killed
parent); its output in a log file. How to tell it is ready differs (``/health`` answering, its status saying
``ready``, the port it chose in its log): the users say, with the process and the log at hand.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from voice.bench.common import ROOT, rss_mb


class ServeProcess:
    """``python -m voice.run --serve ARGS``, started in ``cwd`` with ``env`` (None: this process's), logging to
    ``log`` (``append``: after what it holds)."""

    def __init__(
        self, args: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT, append: bool = False
    ) -> None:
        self.args, self.log, self.env, self.cwd, self.append = args, log, env, cwd, append
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServeProcess:
        with open(self.log, "a" if self.append else "w") as log:  # the child keeps its own handle
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "voice.run", "--serve", *self.args],
                cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def rss_mb(self) -> float:
        """VmRSS of the server process itself (not its engines' processes), in MB."""
        assert self.proc is not None
        return rss_mb(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL to the whole process group, as a crash or an OOM kill looks."""
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = 60) -> int | None:
        """Ctrl+C, as a person stops it; its exit code, or None if it had to be killed after ``timeout_s``."""
        if not self.alive():
            return None if self.proc is None else self.proc.returncode
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

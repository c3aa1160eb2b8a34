"""The deployment of deploy/ on loopback, for its tests and python -m voice.bench scale: voice workers
(`python -m voice.run --serve` processes) and the HAProxy front door started with
deploy/haproxy.cfg as shipped, its addresses given through the environment."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from voice.bench.common import ROOT, free_port
from voice.bench.serve_process import ServeProcess

HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
FRONT_SLOTS = 3  # the workers deploy/haproxy.cfg names


class Worker(ServeProcess):
    """One `voice.run --serve` process of the deployment, on ``port``, its log appended to ``log``."""

    def __init__(self, port: int, log: Path, args: list[str]) -> None:
        super().__init__(["--port", str(port), *args], log, append=True)
        self.port = port

    def start(self) -> Worker:
        super().start()
        return self

    def health(self) -> dict | None:
        """What ``/health`` says (also when it answers 503), or None when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return json.loads(e.read())
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout_s: float = 300) -> Worker:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"worker on {self.port} exited: {self.log.read_text()[-3000:]}")
            if (self.health() or {}).get("status") == "ready":
                return self
            time.sleep(0.5)
        raise RuntimeError(f"worker on {self.port} not ready in {timeout_s:.0f} s: {self.log.read_text()[-3000:]}")

    @property
    def sessions(self) -> int:
        return (self.health() or {}).get("sessions", 0)


class FrontDoor:
    """HAProxy with deploy/haproxy.cfg in front of up to three workers."""

    def __init__(self, address: str, workers: list[Worker], sessions_per_worker: int, log: Path) -> None:
        """``address``: host:port to listen on (the workers' ``--public-url``)."""
        if shutil.which("haproxy") is None:
            raise RuntimeError("HAProxy is not installed (Debian: apt-get install haproxy; scripts/setup does)")
        if len(workers) > FRONT_SLOTS:
            raise ValueError(f"deploy/haproxy.cfg names {FRONT_SLOTS} workers")
        self.address = address
        ports = [w.port for w in workers] + [free_port() for _ in range(FRONT_SLOTS - len(workers))]  # unused: down
        env = {**os.environ, "VOICE_FRONT": self.address, "VOICE_WORKER_SESSIONS": str(sessions_per_worker)}
        env |= {f"VOICE_WORKER_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(ports)}
        out = open(log, "w")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(["haproxy", "-f", str(HAPROXY_CFG), "-db"], env=env, stdout=out, stderr=out)
        out.close()
        self.log = log
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {log.read_text()[-2000:]}")
            try:
                host, port = self.address.rsplit(":", 1)
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"ws://{self.address}/ws"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def worker_args(db: str, llm_urls: list[str], front: str | None, max_sessions: int, *extra: str) -> list[str]:
    """A worker's command line in a deployment (deploy/README.md shows the same)."""
    args = ["--db", db, "--max-sessions", str(max_sessions), "--log-json"]
    for url in llm_urls:
        args += ["--llm-url", url]
    if front:
        args += ["--public-url", f"http://{front}"]
    return [*args, *extra]

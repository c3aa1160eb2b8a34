"""A vLLM OpenAI-compatible server for the LLM pool's tests and ``python -m voice.bench failover``/``scale``.

:func:`launch_vllm_server` starts one in its own process (as tests/integration/test_llm.py does); :class:`TCPProxy`
forwards a port to it and can be killed (listener and every connection reset at once, as a crashed host looks from
the client) and started again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from llm.vllm_engine import default_dtype
from voice.bench.common import ROOT, free_port


def launch_vllm_server(
    model_dir: Path,
    work: Path,
    dtype: str | None = None,
    prefix_caching: bool = True,
    timeout_s: float = 300,
    extra_args: list[str] | None = None,
) -> tuple[str, subprocess.Popen]:
    """Start the server and wait for ``/health``; returns its URL and process."""
    port = free_port()
    dtype = dtype or default_dtype()
    env = {
        **os.environ,
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(work / "cache"),
        "VLLM_RPC_BASE_PATH": str(work),
        "HF_HUB_OFFLINE": "1",
    }
    log = open(work / "server.log", "w")  # noqa: SIM115 - the child holds it; closed with the process
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype,
        "--max-model-len", "2048", "--enforce-eager",
        "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching", *(extra_args or []),
    ]  # fmt: skip
    # Its own process group: a kill takes vLLM's engine processes with it (they outlive a killed parent).
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    log.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM server exited: {(work / 'server.log').read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=1, trust_env=False).status_code == 200:
                return url, proc
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"vLLM server did not come up in {timeout_s:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


class TCPProxy:
    """Forwards ``port`` (0: any free one) to ``target_port`` on the loopback, until killed."""

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self.port = port
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> TCPProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def kill(self) -> None:
        """Stop listening and reset every connection, both sides, now."""
        if self._server is not None:
            self._server.close()
        for t in list(self._transports):
            t.abort()  # the pipes see the end of their streams and return
        self._transports.clear()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        mine = {writer.transport}
        self._transports |= mine
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            except OSError:
                writer.transport.abort()
                return
            mine.add(up_writer.transport)
            self._transports |= mine
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._tasks.discard(task)
            self._transports -= mine

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

"""Headless Chromium with a WAV file as its microphone, driven over the DevTools protocol.

    async with launch(wav) as browser:
        await browser.navigate("http://127.0.0.1:8765/?autostart=1")
        await browser.wait_for("window.voiceState.status === 'ready'", timeout=30)
        state = await browser.evaluate("window.voiceState")

Chromium's fake capture device reads the file from its start when the page opens the
microphone, and repeats the file's last 10 ms after it ends: ``padded_wav`` appends
silence so that what repeats is silence. The browser runs under ``timeout`` (a hard
limit) in its own process group, killed on exit, with a fresh profile directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from websockets.asyncio.client import connect

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def chromium_available() -> bool:
    return os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)


def padded_wav(src: Path | np.ndarray, out: Path, pad_s: float = 3.0, rate: int | None = None) -> Path:
    """Write ``src`` (a file, or float samples at ``rate``) to ``out`` as mono 16-bit PCM
    with ``pad_s`` seconds of trailing silence."""
    if isinstance(src, np.ndarray):
        if rate is None:
            raise ValueError("rate is needed with samples")
        audio = src.astype(np.float32)
    else:
        audio, rate = sf.read(str(src), dtype="float32", always_2d=True)
        audio = audio.mean(axis=1)
    audio = np.concatenate([audio, np.zeros(round(pad_s * rate), dtype=np.float32)])
    out.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(out), np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16")
    return out


class CdpError(RuntimeError):
    pass


class Browser:
    """One page target of a running Chromium, over its DevTools WebSocket."""

    def __init__(self, proc: subprocess.Popen, profile: Path, port: int, stderr_path: Path) -> None:
        self.proc = proc
        self.profile = profile
        self.port = port
        self.stderr_path = stderr_path
        self.console: list[str] = []  # console messages and uncaught exceptions of the page
        # Called with every DevTools event (after Network.enable, e.g. Network.webSocketFrameSent).
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self._ws: Any = None
        self._reader: asyncio.Task | None = None
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}

    async def _attach(self) -> None:
        targets = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{self.port}/json/list")
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            await asyncio.to_thread(_get_json, f"http://127.0.0.1:{self.port}/json/new?about:blank", "PUT")
            targets = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{self.port}/json/list")
            pages = [t for t in targets if t.get("type") == "page"]
        self._ws = await connect(pages[0]["webSocketDebuggerUrl"], max_size=None, ping_interval=None)
        self._reader = asyncio.create_task(self._read())
        await self.send("Runtime.enable")
        await self.send("Page.enable")

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                msg = json.loads(raw)
                if "id" in msg:
                    fut = self._pending.pop(msg["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    continue
                for listener in self.listeners:
                    listener(msg)
                if msg.get("method") == "Runtime.consoleAPICalled":
                    p = msg["params"]
                    args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                    self.console.append(f"console.{p.get('type')}: {args}")
                elif msg.get("method") == "Runtime.exceptionThrown":
                    d = msg["params"]["exceptionDetails"]
                    self.console.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        except Exception:  # the connection closed: fail whoever waits
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(CdpError("DevTools connection closed"))

    async def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        mid = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[mid] = fut
        await self._ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        msg = await asyncio.wait_for(fut, timeout)
        if "error" in msg:
            raise CdpError(f"{method}: {msg['error']}")
        return msg.get("result", {})

    async def evaluate(self, expr: str, await_promise: bool = False, timeout: float = 30.0) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        res = await self.send(
            "Runtime.evaluate",
            {"expression": expr, "returnByValue": True, "awaitPromise": await_promise},
            timeout=timeout,
        )
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise CdpError(f"{expr!r}: {d.get('exception', {}).get('description') or d.get('text')}")
        return res.get("result", {}).get("value")

    async def wait_for(self, expr: str, timeout: float, interval: float = 0.25) -> Any:
        """Poll ``expr`` until it is truthy; its value. TimeoutError (with the last value) otherwise."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            with contextlib.suppress(CdpError):
                last = await self.evaluate(expr)
                if last:
                    return last
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{expr!r} still {last!r} after {timeout} s")
            if self.proc.poll() is not None:
                raise CdpError(f"chromium exited ({self.proc.returncode}): {self.stderr_tail()}")
            await asyncio.sleep(interval)

    async def navigate(self, url: str, timeout: float = 30.0) -> None:
        res = await self.send("Page.navigate", {"url": url}, timeout=timeout)
        if res.get("errorText"):
            raise CdpError(f"navigate {url}: {res['errorText']}")
        await self.wait_for("document.readyState === 'complete'", timeout=timeout)

    def stderr_tail(self, n: int = 3000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    async def _close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 2)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


def _get_json(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def chromium_args(wav: Path, profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--mute-audio",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav.resolve()}%noloop",
        "--autoplay-policy=no-user-gesture-required",
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "about:blank",
    ]


@asynccontextmanager
async def launch(wav: Path, hard_timeout_s: float = 300.0, start_timeout_s: float = 30.0) -> AsyncIterator[Browser]:
    """Chromium with ``wav`` (16-bit PCM, padded: see ``padded_wav``) as the microphone."""
    if not chromium_available():
        raise FileNotFoundError(CHROMIUM)
    profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
    stderr_path = profile.parent / f"{profile.name}.stderr"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            ["timeout", "--signal=KILL", str(int(hard_timeout_s)), CHROMIUM, *chromium_args(wav, profile)],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
    browser: Browser | None = None
    try:
        port = await _devtools_port(proc, profile, stderr_path, start_timeout_s)
        browser = Browser(proc, profile, port, stderr_path)
        await browser._attach()
        yield browser
    finally:
        if browser is not None:
            await browser._close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
        with contextlib.suppress(OSError):
            stderr_path.unlink()


async def _devtools_port(proc: subprocess.Popen, profile: Path, stderr_path: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    active = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if active.exists():
            lines = active.read_text().splitlines()
            if lines and lines[0].strip().isdigit():
                return int(lines[0])
        if proc.poll() is not None:
            tail = stderr_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"chromium exited ({proc.returncode}) before DevTools started: {tail}")
        await asyncio.sleep(0.1)
    raise TimeoutError(
        f"no DevTools port from chromium in {timeout} s: {stderr_path.read_text(errors='replace')[-3000:]}"
    )

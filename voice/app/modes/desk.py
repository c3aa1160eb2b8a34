"""The desk: the sound card's microphone and speaker, with a level meter in the terminal (the default mode)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from shell.clock import MonotonicClock
from shell.config import SessionConfig
from shell.engines import EngineConfig
from shell.pump import Pump
from shell.recording import RecordingDevice
from shell.tools import Tools
from voice.app.runtime import Runtime, fail


def stop_on_signals() -> asyncio.Event:
    """Set on Ctrl+C or SIGTERM: the mode winds down and the runtime closes."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def _device(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


async def run_local(
    args: argparse.Namespace, engine_cfg: EngineConfig, session_cfg: SessionConfig, tools: Tools | None = None
) -> int:
    from transport.local import SoundCardDevice
    from transport.sound import AudioDeviceError, DeviceChoice, SoundCard
    from voice.app.terminal import TerminalView

    devices = DeviceChoice(_device(args.input_device), _device(args.output_device), args.device_rate)
    try:  # the devices first: a missing microphone is said before a minute of loading
        card = SoundCard(devices, engine_cfg.output_rate)
    except AudioDeviceError as e:
        return fail(str(e))
    view = TerminalView()
    code = 0
    try:
        print(f"mic: {card.input_name} · speaker: {card.output_name} · {card.rate} Hz", file=sys.stderr)
        prompt = session_cfg.system_prompt
        async with Runtime(args, engine_cfg, store=True, resume=True, system_prompt=prompt, tools=tools) as rt:
            session = rt.session("local", MonotonicClock(), session_cfg, [view.event])
            if session.history.turns:
                view.message(f"(resuming: {len(session.history.turns)} turns so far)")
            device = SoundCardDevice(card, on_first_audio=lambda: view.message("listening — speak; Ctrl+C to end"))
            recorded = RecordingDevice(device, session.output_rate) if args.record is not None else None
            stop = stop_on_signals()

            async def meter() -> None:
                while not stop.is_set():
                    view.level(device.level_db)
                    view.render()
                    await asyncio.sleep(0.1)

            meter_task = asyncio.create_task(meter())
            try:
                await Pump(session, recorded or device).run(stop)
            except AudioDeviceError as e:
                view.close()
                print(f"voice.run: {e}", file=sys.stderr)
                code = 1
            finally:
                meter_task.cancel()
                card.close()
                await session.aclose()
                if recorded is not None:
                    await rt.keep_recording(recorded.recording, "desk")
    finally:
        card.close()
        view.close()
    rt.saved("python -m voice.history show {id}")
    return code

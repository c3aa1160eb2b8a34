"""Serve WebSocket clients, the browser page, Realtime, phone calls and WebRTC (``python -m voice.run --serve``)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Mapping

from core.events import Event
from shell.config import SessionConfig
from shell.engines import EngineConfig
from shell.tools import Tools
from transport.server_types import ServedAgent
from voice.app.logs import event_logger
from voice.app.metrics import PipelineMetrics
from voice.app.runtime import Runtime, call_config, fail


async def run_serve(
    args: argparse.Namespace,
    engine_cfg: EngineConfig,
    session_cfg: SessionConfig,
    tools: Tools | None = None,
    agents: Mapping[str, ServedAgent] | None = None,
) -> int:
    from transport.protocol import Limits
    from transport.ws_server import ServerConfig, VoiceServer

    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token or None,
        allow_origins=tuple(args.allow_origin),
        max_sessions=args.max_sessions,
        public_url=args.public_url,
        limits=Limits(idle_timeout_s=args.idle_timeout),
        session=session_cfg,
        tools=tools,
        agents=dict(agents or {}),
        call=call_config(args),
        ice_servers=tuple(args.ice_server),
        record_dir=args.record,
    )
    try:
        config.check()
    except ValueError as e:
        return fail(str(e))
    async with Runtime(args, engine_cfg, store=True, resume=False, tools=tools) as rt:
        assert rt.engines is not None
        hook = None
        if args.log_json:

            def hook(session_id: str, event: Event) -> None:
                event_logger(session_id)(event)

        metrics = rt.metrics or PipelineMetrics()
        server = VoiceServer(rt.engines, config, metrics, on_event=hook, conversations=rt.conversations)
        try:
            await server.start()
        except OSError as e:
            return fail(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
        print(f"ready in {rt.cold_s:.1f} s", file=sys.stderr)
        print(f"serving http://{args.host}:{server.port}/ (page), ws://{args.host}:{server.port}/ws, "
              f"ws://{args.host}:{server.port}/v1/realtime", file=sys.stderr, flush=True)  # fmt: skip
        drain, stop = drain_on_sigterm()
        waits = [asyncio.ensure_future(drain.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if drain.is_set() and not stop.is_set():
                live = len(server.connections)
                print(f"draining: no new session; {live} live, {args.drain_timeout:g} s to end",
                      file=sys.stderr, flush=True)  # fmt: skip
                draining = asyncio.ensure_future(server.drain(args.drain_timeout))
                waits.append(draining)
                await asyncio.wait([draining, waits[1]], return_when=asyncio.FIRST_COMPLETED)
                left = len(server.connections)  # (what drain() returns, or the sessions a Ctrl+C cuts)
                print(f"drained: {live - left} sessions ended, {left} cut", file=sys.stderr, flush=True)
        finally:
            for waiting in waits:
                waiting.cancel()
            print("shutting down ...", file=sys.stderr, flush=True)
            await server.close()
    return 0


def drain_on_sigterm() -> tuple[asyncio.Event, asyncio.Event]:
    """(drain, stop): SIGTERM (an orchestrator, a deploy) asks to drain; Ctrl+C, or a second
    SIGTERM, to stop now."""
    drain, stop = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_term() -> None:
        (stop if drain.is_set() else drain).set()

    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    return drain, stop

"""Durable conversations: finalized turns survive a killed server and a vanished client,
a client that comes back with its session id goes on from there, and a database
locked by another process never holds up the audio."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from unittest.mock import ANY

import numpy as np
import pytest
from websockets.asyncio.client import connect

from core.history import History
from shell.clock import MonotonicClock
from shell.flow_functions import resumed_run
from shell.session import Session
from tests.conftest import ROOT, recordings
from transport.client import talk
from transport.files import load_audio
from transport.protocol import float_to_pcm16
from transport.replay import replay
from transport.ws_server import ServerConfig, VoiceServer
from voice.agent.load import load_agent
from voice.app.conversations import Conversations
from voice.app.store import ConversationStore, StoreFull, StoreLocked, open_history
from voice.bench.scoring import word_error_rate

pytestmark = pytest.mark.engines


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(port: int, db, log_path, *more: str) -> subprocess.Popen:
    log = open(log_path, "a")  # noqa: SIM115 - the process holds it
    proc = subprocess.Popen(
        [sys.executable, "-m", "voice.run", "--serve", "--log-json", "--port", str(port), "--db", str(db), *more],
        cwd=ROOT, stdout=log, stderr=log, start_new_session=True,  # its own group: killed whole, engines too
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise AssertionError("the server did not come up")


async def _say_until_reply_plays(url: str, audio: np.ndarray, played_s: float, then) -> str:
    """Say ``audio``, play (and acknowledge) the reply as it comes; after ``played_s`` of it, call ``then()``."""
    async with connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000, "acks": True}))
        session = json.loads(await ws.recv())["session"]
        frames = [audio[i : i + 320] for i in range(0, len(audio), 320)]
        received, t0, i = 0, time.monotonic(), 0
        while received < played_s * 24000:
            await ws.send(float_to_pcm16(frames[i] if i < len(frames) else np.zeros(320, np.float32)))
            i += 1
            while True:  # what came in meanwhile
                try:
                    message = await asyncio.wait_for(ws.recv(), max(0.0, t0 + i * 0.02 - time.monotonic()))
                except TimeoutError:
                    break
                if isinstance(message, bytes):
                    received += len(message) // 2
                    await ws.send(json.dumps({"type": "played", "samples": received}))
            assert i < 3000, "no reply in 60 s"
        await then(ws)
    return session


async def test_a_killed_server_keeps_every_finalized_turn_and_the_conversation_goes_on(tmp_path):
    db, port = tmp_path / "conversations.db", _free_port()
    url = f"ws://127.0.0.1:{port}/ws"
    server = _serve(port, db, tmp_path / "serve.log")
    try:

        async def kill(ws) -> None:
            # Mid-reply, the whole server at once (its engine processes too, as an OOM kill or a
            # container stop does): no chance to write anything more.
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)

        question = _rec("aew_a0003")
        session = await _say_until_reply_plays(url, load_audio(question.path), 1.0, kill)
        with ConversationStore.open(db) as store:
            turns = store.turns(session)
        # The user's turn was final (stored at the ASR final); the reply was in flight: not stored.
        assert [t.role for t in turns] == ["user"]
        assert word_error_rate(question.transcript, turns[0].text) <= 0.2

        server = _serve(port, db, tmp_path / "serve.log")
        # quiet_s: the restarted server's first reply, on a cold engine beside the suite's own, may take
        # longer than the default 1.5 s of quiet to start (the client would stop before it).
        result = await talk(url, load_audio(_rec("axb_a0004").path), resume=session, quiet_s=15.0)
        assert result.session == session and [t["role"] for t in result.history] == ["user"]
        assert result.history[0]["text"] == turns[0].text
        seen = [(e["type"], e.get("client_t")) for e in result.events]
        assert result.of("turn_end") and not result.of("error"), (seen, (tmp_path / "serve.log").read_text()[-12000:])
        with ConversationStore.open(db) as store:
            after = store.turns(session)
        assert [t.role for t in after] == ["user", "user", "assistant"]
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


async def _say_after_the_greeting_until(url: str, audio: np.ndarray, stop) -> tuple[str, list[dict]]:
    """Once the agent's greeting has played, say ``audio`` in real time (then silence) until
    ``stop(message)`` is true of a message from the server; the session and the JSON messages."""
    async with connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        messages: list[dict] = []
        while not any(m["type"] == "ready" for m in messages):  # audio before it is ahead of real time
            messages.append(json.loads(await ws.recv()))
        session = next(m["session"] for m in messages if m["type"] == "ready")
        greeted, said, t0 = False, 0, time.monotonic()
        for i in range(4000):
            frame = audio[said * 320 : (said + 1) * 320] if greeted else np.zeros(0, np.float32)
            said += greeted
            await ws.send(float_to_pcm16(np.pad(frame, (0, 320 - len(frame)))))
            while True:
                try:
                    message = await asyncio.wait_for(ws.recv(), max(0.002, t0 + (i + 1) * 0.02 - time.monotonic()))
                except TimeoutError:
                    break
                if not isinstance(message, bytes):
                    messages.append(json.loads(message))
                    greeted = greeted or messages[-1]["type"] == "turn_end"
                if stop(message):
                    return session, messages
        raise AssertionError(f"not seen in 80 s: {messages}")


async def test_a_server_killed_right_after_a_transition_resumes_at_the_new_step_with_its_state(tmp_path, say):
    """Issue 46: the step a reply took the flow to, and what it collected, are stored with the
    person's turn as they happen; a server killed then, before the reply's own turn is stored,
    resumes there."""
    db, port = tmp_path / "conversations.db", _free_port()
    agent = ROOT / "agents" / "restaurant.yaml"
    server = _serve(port, db, tmp_path / "serve.log", "--agent", str(agent))
    try:
        entered = collected_there = False

        def first_sound_once_collected_after_a_transition(message) -> bool:
            nonlocal entered, collected_there
            if isinstance(message, bytes):
                return collected_there
            m = json.loads(message)
            entered = entered or (m["type"] == "step" and m["step"] != "greeting")
            collected_there = collected_there or (entered and m["type"] == "collected" and bool(m["values"]))
            return False

        question = say("I'd like to book a table for four people on Friday, please.")
        session, messages = await _say_after_the_greeting_until(
            f"ws://127.0.0.1:{port}/ws", question, first_sound_once_collected_after_a_transition
        )
        os.killpg(server.pid, signal.SIGKILL)  # its question has begun to play: the reply's turn is not stored
        server.wait(10)
        steps = [m["step"] for m in messages if m["type"] == "step"]
        collected: dict = {}
        for m in messages:
            if m["type"] == "collected":
                collected |= m["values"]
        with ConversationStore.open(db) as store:
            history = History()
            for turn in store.turns(session):
                history.add(turn)
        stored = [(t.role, t.text) for t in history.turns]
        assert stored[:2] == [("assistant", "Luigi's, good evening. How can I help?"), ("user", ANY)], stored
        run, resumed = resumed_run(load_agent(agent).flow, history)
        assert resumed and run.step_name == steps[-1] != "greeting", stored
        assert run.state == collected
        said = "; ".join(f"{m['type']} {m.get('text') or m.get('values') or m.get('message') or ''}" for m in messages)
        assert collected.get("party_size") == 4, said  # said in the turn that took the flow there
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)


async def test_a_vanished_client_keeps_what_it_heard_and_resumes(voice_server):
    async def vanish(ws) -> None:
        ws.transport.abort()  # gone mid-reply, without a close frame

    session = await _say_until_reply_plays(voice_server.ws_url, load_audio(_rec("aew_a0003").path), 1.5, vanish)
    for _ in range(200):
        if session in voice_server.closed:
            break
        await asyncio.sleep(0.05)
    turns = voice_server.conversations.store.turns(session)
    assert [t.role for t in turns] == ["user", "assistant"]
    heard = turns[1]
    # Stored as far as the client said it played (1.5 s of a longer reply), never the unheard rest.
    assert heard.interrupted and heard.text and len(heard.text) < len(heard.generated_text)
    result = await talk(voice_server.ws_url, load_audio(_rec("axb_a0004").path), resume=session)
    assert [t["text"] for t in result.history] == [t.text for t in turns]
    assert result.history[1]["interrupted"] is True
    assert result.of("turn_end")
    assert [t.role for t in voice_server.conversations.store.turns(session)] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_an_unknown_session_is_said_and_a_new_one_started(voice_server):
    result = await talk(voice_server.ws_url, load_audio(_rec("axb_a0004").path), resume="nosuchsession")
    assert [e["code"] for e in result.of("error")] == ["unknown_session"]
    assert result.session != "nosuchsession" and result.history == [] and result.of("turn_end")


async def test_a_full_disk_is_said_and_the_conversation_goes_on_in_memory(engines, tmp_path):
    store = ConversationStore.open(tmp_path / "c.db")
    server = VoiceServer(engines, ServerConfig(port=0), conversations=Conversations(store))
    await server.start()
    try:
        # SQLite's own "database or disk is full", as on a full disk: no page can be added,
        # and the last one is filled up.
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreFull):
            for i in range(10000):
                store.create_session(f"filler-{i:05d}-" + "x" * 40)
        result = await talk(f"ws://127.0.0.1:{server.port}/ws", load_audio(_rec("axb_a0004").path))
        codes = [e["code"] for e in result.of("error")]
        assert codes == ["store_unavailable"], codes
        assert result.of("turn_end") and result.of("transcript_final")
        for _ in range(200):
            if result.session in server.closed:
                break
            await asyncio.sleep(0.05)
        conn = server.closed[result.session]
        assert [t.role for t in conn.history.turns] == ["user", "assistant"]  # kept in memory
    finally:
        await server.close()
        store.close()


async def test_a_database_locked_by_another_process_does_not_hold_up_the_audio(engines, tmp_path):
    """Real time. Another process holds the write lock through the whole
    conversation, past the store's 3 s busy timeout: the blocks are still fed
    on time (when the history wrote on the event loop, the user's final held
    it up for the whole busy timeout), and once the lock goes every turn is
    committed, in order."""
    db = tmp_path / "c.db"
    store = ConversationStore.open(db, timeout=3.0)
    session_id, history, recorder = open_history(store, None)
    assert recorder.flush()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3, sys
            conn = sqlite3.connect({str(db)!r}, isolation_level=None)
            conn.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            sys.stdin.readline()
            conn.execute("COMMIT")
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        events: list[dict] = []
        session = Session(engines, MonotonicClock(), on_event=events.append, history=history)
        try:
            result = await replay(session, load_audio(_rec("axb_a0004").path), settle=False)
        finally:
            await session.aclose()
        assert [t.role for t in history.turns] == ["user", "assistant"]
        assert not recorder.flush()  # the writer gives up after 3 s, and keeps the turns
        assert isinstance(recorder.error, StoreLocked) and recorder.pending == history.turns
        assert session_id not in {r.id for r in store.list_sessions(None)}  # not even the session: it comes with a turn
    finally:
        holder.communicate("\n", timeout=30)
    assert result.lateness_max_s < 1.0, result  # the loop never waited for the database
    assert recorder.flush() and recorder.error is None
    assert store.turns(session_id) == history.turns
    store.close()


async def _hello_and_gone(port: int, dialect: str, resume: str | None = None) -> tuple[str, list[str]]:
    """Connect, be told the session's id, and go without a word; returns the id and the error codes said."""
    if dialect == "ws":
        async with connect(f"ws://127.0.0.1:{port}/ws") as ws:
            hello = {"type": "hello", "sample_rate": 16000, **({"session": resume} if resume else {})}
            await ws.send(json.dumps(hello))
            codes = []
            while (message := json.loads(await ws.recv()))["type"] == "error":
                codes.append(message["code"])
            assert message["type"] == "ready", message
            return message["session"], codes
    query = f"?session={resume}" if resume else ""
    async with connect(f"ws://127.0.0.1:{port}/v1/realtime{query}") as ws:
        codes = []
        while (message := json.loads(await ws.recv()))["type"] == "error":
            codes.append(message["error"]["code"])
        assert message["type"] == "session.created", message
        return message["session"]["id"].removeprefix("sess_"), codes


async def test_connections_that_never_speak_leave_nothing_and_one_that_speaks_leaves_its_turns(engines, tmp_path):
    """Storage on first use, on the real server: a reconnect storm in little (hello and gone, in
    both dialects, and ids that never spoke asked back) leaves not a row; a conversation that
    speaks leaves exactly one session, with the id the client was told, and its turns."""
    db = tmp_path / "c.db"
    store = ConversationStore.open(db)
    server = VoiceServer(engines, ServerConfig(port=0), conversations=Conversations(store))
    await server.start()

    def rows() -> tuple[int, int]:
        conn = sqlite3.connect(db)
        try:
            return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "turns"))
        finally:
            conn.close()

    async def settled() -> None:  # every connection closed, its recorder flushed
        for _ in range(200):
            if not server.connections:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"still open: {list(server.connections)}")

    try:
        told: list[str] = []
        for _ in range(10):
            for dialect in ("ws", "realtime"):
                sid, codes = await _hello_and_gone(server.port, dialect)
                assert codes == []
                told.append(sid)
        await settled()
        for dialect, asked in (("ws", told[0]), ("realtime", told[1])):  # an id that never spoke is unknown
            sid, codes = await _hello_and_gone(server.port, dialect, resume=asked)
            assert codes == ["unknown_session"] and sid != asked
        await settled()
        assert len(set(told)) == len(told)
        assert rows() == (0, 0) and store.list_sessions(None) == []

        url = f"ws://127.0.0.1:{server.port}/ws"
        result = await talk(url, load_audio(_rec("axb_a0004").path))
        assert not result.of("error") and result.of("turn_end")
        await settled()
        (record,) = store.list_sessions(None)
        assert record.id == result.session  # the id the client was told in 'ready'
        turns = store.turns(record.id)
        assert [t.role for t in turns] == ["user", "assistant"] and rows() == (1, 2)
        assert turns == server.closed[result.session].history.turns
        again = await talk(url, load_audio(_rec("aew_a0003").path), resume=record.id)
        assert again.session == record.id and [t["role"] for t in again.history] == ["user", "assistant"]
        await settled()
        assert rows() == (1, 4)
    finally:
        await server.close()
        store.close()

"""The conversation store on real SQLite files and on a real PostgreSQL server: round trips,
durability, concurrency, the bad cases (corrupt, locked, full, unreachable, unknown or foreign
sessions), the schema's migration, the turn recorder and its writer thread (never an SQL
call on the caller's thread), and the history's listener.

The tests that take ``db`` run on both databases (a file, or a new database on the server of
the ``postgres`` fixture); those that take ``sqlite_db`` are about a file (WAL, pages, locks
another process takes on it, damage), those marked ``postgres_only`` about a server."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.commands import StartResponse, Synthesize, TranscribeFinal
from core.history import History, Turn
from core.ledger import Word
from core.turns import Conversation
from tests.conftest import ROOT, raw
from voice.app.conversations import Conversations
from voice.app.store import (
    SCHEMA_VERSION,
    AmbiguousSession,
    ConversationStore,
    ForeignSession,
    SessionError,
    SessionExists,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreUnreachable,
    TurnRecorder,
    UnknownSession,
    UnsupportedDatabase,
    default_db_path,
    open_history,
)


@pytest.fixture
def sqlite_db(tmp_path) -> Path:
    return tmp_path / "conversations.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Path | str:
    """Where the conversations are: an SQLite file, or a new database on the test server."""
    if request.param == "sqlite":
        return tmp_path / "conversations.db"
    return request.getfixturevalue("postgres").create_database(f"t{next(_DATABASES)}")


_DATABASES = itertools.count(1)


@pytest.fixture
def store(db):
    s = ConversationStore.open(db)
    yield s
    s.close()


def user(text="what time is it", t0=0.1, t1=1.0) -> Turn:
    return Turn("user", text, t_start=t0, t_end=t1)


def reply(text="It is noon.", generated=None, interrupted=False, response=1, t0=1.6, t1=2.4) -> Turn:
    return Turn(
        "assistant",
        text,
        t_start=t0,
        t_end=t1,
        generated_text=generated if generated is not None else text,
        interrupted=interrupted,
        response=response,
    )


V1_DUMP = ROOT / "tests" / "fixtures" / "conversations_v1.sql"
V1_SESSION = "01d5e55101d5e55101d5e55101d5e551"


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


# -- round trip, schema, durability -----------------------------------------


def test_turns_round_trip_with_every_field(store):
    store.create_session("s1", system_prompt="be brief", meta={"dialect": "voice"})
    turns = [
        user("what time is it", 0.1, 1.0),
        reply("It is noon and", generated="It is noon and the sun is out.", interrupted=True, response=1),
        Turn("user", "thanks", t_start=3.0, t_end=3.4, extra={"audio_s": 0.35, "lang": "en"}),
        Turn("assistant", "You're welcome.", generated_text="You're welcome.", response=2),  # no timings
    ]
    seqs = [store.add_turn("s1", t) for t in turns]
    assert seqs == [1, 2, 3, 4]
    assert store.turns("s1") == turns
    stored = store.stored_turns("s1")
    assert [s.audio_s for s in stored] == [0.9, 0.8, 0.35, None]  # timings, or extra["audio_s"]
    assert all(s.created_at > 0 for s in stored)
    assert stored[1].turn.interrupted is True and stored[0].turn.interrupted is False
    rec = store.session("s1")
    assert (rec.id, rec.system_prompt, rec.meta, rec.turns, rec.last_text) == (
        "s1",
        "be brief",
        {"dialect": "voice"},
        4,
        "You're welcome.",
    )
    assert not rec.owned and rec.updated_at >= rec.created_at
    # the history the store gives back sends the same messages as the one it was written from
    assert History(store.turns("s1")).messages("be brief") == History(list(turns)).messages("be brief")


def test_reopening_finds_everything_and_the_schema_version(db):
    with ConversationStore.open(db) as s:
        s.create_session("a")
        s.add_turn("a", user())
    with ConversationStore.open(db) as s:
        assert s.turns("a") == [user()]
    assert raw(db, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


def test_wal_mode_synchronous_and_busy_timeout(sqlite_db):
    store = ConversationStore.open(sqlite_db)
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1000
    other = sqlite3.connect(sqlite_db)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # a property of the file
    other.close()
    with ConversationStore.open(sqlite_db, synchronous="FULL", timeout=0.25) as full:
        assert full._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert full._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    store.close()


def test_a_written_turn_is_visible_to_another_connection_at_once(store, db):
    store.create_session("s")
    store.add_turn("s", user("hello there"))
    assert raw(db, "SELECT role, text FROM turns WHERE session_id = 's'") == [("user", "hello there")]


def test_a_finalized_turn_survives_sigkill(db):
    proc = run_python(f"""
        import os, signal
        from core.history import Turn
        from voice.app.store import ConversationStore, open_history
        s = ConversationStore.open({str(db)!r})
        s.create_session("k")
        s.add_turn("k", Turn("user", "remember me", t_start=0.0, t_end=1.0))
        sid, history, recorder = open_history(s, None)  # and through the writer thread
        history.add(Turn("user", "and me", t_start=0.0, t_end=1.0))
        assert recorder.flush()  # committed
        print("written", sid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint, no atexit
    """)
    assert proc.returncode == -9 and "written" in proc.stdout, proc.stderr
    sid = proc.stdout.split()[-1]
    with ConversationStore.open(db) as s:
        assert [t.text for t in s.turns("k")] == ["remember me"]
        assert [t.text for t in s.turns(sid)] == ["and me"]


def test_replace_and_delete_a_turn(store):
    store.create_session("s")
    store.add_turn("s", user())
    seq = store.add_turn("s", reply("It is noon. The sun is out.", response=1))
    store.add_turn("s", user("and tomorrow", 3.0, 3.5))
    cut = reply("It is noon.", generated="It is noon. The sun is out.", interrupted=True)
    store.replace_turn("s", seq, cut)
    assert store.turns("s")[1] == cut
    store.delete_turn("s", seq)
    assert [t.text for t in store.turns("s")] == ["what time is it", "and tomorrow"]
    assert [s.seq for s in store.stored_turns("s")] == [1, 3]
    with pytest.raises(StoreError, match="no turn 2"):
        store.replace_turn("s", seq, cut)


def test_default_db_path(monkeypatch, tmp_path):
    monkeypatch.delenv("VOICE_DB", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_db_path() == tmp_path / ".local/share/voice/conversations.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_db_path() == tmp_path / "data/voice/conversations.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/is/ignored")
    assert default_db_path() == tmp_path / ".local/share/voice/conversations.db"
    monkeypatch.setenv("VOICE_DB", str(tmp_path / "mine.db"))
    assert default_db_path() == tmp_path / "mine.db"


def test_open_creates_the_folder(tmp_path):
    with ConversationStore.open(tmp_path / "a" / "b" / "c.db") as s:
        s.create_session("x")
    assert (tmp_path / "a" / "b" / "c.db").is_file()


def test_a_database_of_schema_version_1_is_migrated_and_reads_as_before(sqlite_db):
    conn = sqlite3.connect(sqlite_db)
    conn.executescript(V1_DUMP.read_text())
    conn.close()
    with ConversationStore.open(sqlite_db) as s:
        old = s.stored_turns(V1_SESSION)
        assert [(t.seq, t.turn.role, t.turn.text, t.finalized_at) for t in old] == [
            (1, "user", "What's the weather like today?", None),  # not known: stored before the column
            (2, "assistant", "It is sunny and", None),
        ]
        assert old[1].turn.interrupted and old[1].turn.generated_text == "It is sunny and warm."
        assert old[0].created_at > 0 and s.session(V1_SESSION).system_prompt == "Answer in one short sentence."
        s.add_turn(V1_SESSION, user("and tomorrow?"), finalized_at=1234.5)
        assert s.stored_turns(V1_SESSION)[2].finalized_at == 1234.5
    with ConversationStore.open(sqlite_db) as s:  # once is enough
        assert len(s.turns(V1_SESSION)) == 3
    conn = sqlite3.connect(sqlite_db)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(3,)]
    assert "finalized_at" in [r[1] for r in conn.execute("PRAGMA table_info(turns)")]
    conn.close()


def test_tool_turns_are_stored_and_read_back_with_their_call(store):
    from core.history import ToolUse

    sid, history, recorder = open_history(store, None)
    history.add(user("what time is it"))
    call = ToolUse("call_1_0_0", "get_current_time", "{}", "ok", 0.012)
    history.add(Turn("tool", "10:15", t_start=1.9, t_end=1.912, response=1, tool=call))
    history.add(reply("It is a quarter past ten."))
    assert recorder.flush()
    back = store.turns(sid)
    assert [t.role for t in back] == ["user", "tool", "assistant"]
    assert back[1].tool == call and back[1].extra == {} and back[1].text == "10:15"
    assert History(back).messages(None) == history.messages(None)  # resumed, the model gets the same


def test_each_turn_is_stored_with_the_wall_clock_time_it_was_finalized(store):
    sid, history, recorder = open_history(store, None)  # a new session: created by the writer thread
    t0 = time.time()
    u = history.add(user())
    t1 = time.time()
    a = history.add(reply("It is noon. The sun is out."))
    assert recorder.flush()
    time.sleep(0.01)
    t2 = time.time()
    a.text, a.interrupted = "It is noon.", True
    history.changed(a)  # cut after the fact: stamped again
    t3 = time.time()
    assert recorder.flush()
    su, sa = store.stored_turns(sid)
    assert su.turn == u and sa.turn == a
    assert t0 <= su.finalized_at <= t1 and su.finalized_at <= su.created_at  # stamped by the caller, then written
    assert t2 <= sa.finalized_at <= t3 and sa.created_at < t2  # written once, at its first finalization
    store.add_turn(sid, user("direct"))  # the synchronous API, no time given: now
    last = store.stored_turns(sid)[-1]
    assert last.finalized_at == last.created_at


# -- off the event loop: the writer thread ------------------------------------


def _trace(store: ConversationStore) -> list[tuple[str, str]]:
    """(thread name, statement) for each SQLite statement the store's two connections run from now on."""
    seen: list[tuple[str, str]] = []

    def trace(sql: str) -> None:
        seen.append((threading.current_thread().name, sql))

    store._conn.set_trace_callback(trace)
    store._reader.set_trace_callback(trace)
    return seen


def _hold_write_lock(db: Path) -> subprocess.Popen:
    """Another process that holds the database's write lock until a line on its stdin."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sqlite3, sys
                conn = sqlite3.connect({str(db)!r}, isolation_level=None)
                conn.execute("BEGIN EXCLUSIVE")
                print("locked", flush=True)
                sys.stdin.readline()
                conn.execute("COMMIT")
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def _full_store(db: Path) -> tuple[ConversationStore, int]:
    """A store whose file cannot grow: filled with sessions until SQLite says it is full (and its page count)."""
    store = ConversationStore.open(db)
    store.create_session("filler")
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreFull):
        for i in range(1000):
            store.create_session(f"filler-{i:04d}-" + "x" * 40)
    return store, pages


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_database_locked_by_another_process_never_holds_up_the_history(sqlite_db):
    """The history takes its turns at once while another process holds the
    write lock; no SQLite call runs on the caller's thread; once the lock
    goes, the turns are committed in order, as the history has them then."""
    store = ConversationStore.open(sqlite_db, timeout=30)  # the writer waits for the lock as long as it lasts
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    history = History(recorder.load(), listener=recorder)
    seen = _trace(store)
    holder = _hold_write_lock(sqlite_db)
    try:
        caller = threading.current_thread().name
        first = history.add(user("first"))
        _wait_for(lambda: recorder._writing is not None)  # the writer has it, and waits for the lock
        turns = [first] + [user(f"question {i}") if i % 2 else reply(f"answer {i}") for i in range(1, 8)]
        slowest = 0.0
        for turn in turns[1:]:
            t0 = time.perf_counter()
            history.add(turn)
            slowest = max(slowest, time.perf_counter() - t0)
        first.text = "first, amended"  # in flight: written again after
        history.changed(first)
        turns[3].text, turns[3].interrupted = "answer", True  # owed: written as it is now
        history.changed(turns[3])
        history.remove(turns[5])  # owed: never written
        assert slowest < 1.0  # microseconds in fact; loose, as the machine is shared
        assert recorder.error is None and recorder.pending == [t for t in turns if t is not turns[5]]
        assert [sql for name, sql in seen if name == caller] == []  # not one statement, not even a read
        assert store.turns("s") == []  # reads go on (WAL), nothing written yet
        seen.clear()
    finally:
        holder.communicate("\n", timeout=30)
    assert recorder.flush()
    assert recorder.error is None and recorder.pending == []
    store._conn.set_trace_callback(None)
    store._reader.set_trace_callback(None)
    assert store.turns("s") == history.turns and history.turns[0].text == "first, amended"
    assert [s.seq for s in store.stored_turns("s")] == [1, 2, 3, 4, 5, 6, 7]  # the removed one never was
    writes = [(name, sql) for name, sql in seen if not sql.startswith("SELECT")]
    assert writes and {name for name, _ in writes} == {store._writer.name}  # every write on the writer thread
    store.close()


def test_the_caller_never_runs_sqlite_not_even_for_a_new_session(sqlite_db):
    ConversationStore.open(sqlite_db).close()
    store = ConversationStore.open(sqlite_db, timeout=30)
    seen = _trace(store)
    holder = _hold_write_lock(sqlite_db)
    try:
        sid, history, recorder = open_history(store, None, owner="token", system_prompt="be brief")
        history.add(user())
        history.add(reply())
        assert seen == [] or {name for name, _ in seen} == {store._writer.name}
    finally:
        holder.communicate("\n", timeout=30)
    assert recorder.flush() and recorder.error is None
    assert store.session(sid, owner="token").system_prompt == "be brief"
    assert store.turns(sid) == history.turns
    store.close()


def test_close_finishes_the_writes_handed_over(db):
    store = ConversationStore.open(db)
    sid, history, recorder = open_history(store, None)
    for i in range(50):
        history.add(user(f"turn {i}"))
    store.close()  # no flush first
    with ConversationStore.open(db) as s:
        assert [t.text for t in s.turns(sid)] == [f"turn {i}" for i in range(50)]
    history.add(user("too late"))  # never raises: kept, and said
    assert isinstance(recorder.error, StoreError) and "closed" in str(recorder.error)
    assert [t.text for t in recorder.pending] == ["too late"]


def test_a_store_that_fails_at_once_holds_the_new_session_and_its_turns_back(sqlite_db):
    store, pages = _full_store(sqlite_db)
    sid, history, recorder = open_history(store, None)
    history.add(user("kept in memory"))
    assert not recorder.flush()
    assert isinstance(recorder.error, StoreFull) and recorder.pending == history.turns
    store._conn.execute(f"PRAGMA max_page_count = {pages * 1000}")  # space is back: the next change writes all
    history.add(reply())
    assert recorder.flush() and recorder.error is None
    assert store.turns(sid) == history.turns
    store.close()


# -- concurrency ------------------------------------------------------------


@pytest.mark.parametrize("shared", [True, False], ids=["one-store", "store-per-thread"])
def test_concurrent_writers_lose_nothing_and_keep_order(db, shared):
    n_threads, n_turns = 8, 50
    main = ConversationStore.open(db, timeout=30)
    for i in range(n_threads):
        main.create_session(f"s{i}")
    main.create_session("shared")
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def writer(i: int) -> None:
        s = main if shared else ConversationStore.open(db, timeout=30)
        try:
            barrier.wait()
            for k in range(n_turns):
                s.add_turn(f"s{i}", Turn("user" if k % 2 == 0 else "assistant", f"{i}:{k}", t_start=float(k)))
                s.add_turn("shared", Turn("user", f"{i}:{k}"))
        except BaseException as e:
            errors.append(e)
        finally:
            if not shared:
                s.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i in range(n_threads):
        assert [t.text for t in main.turns(f"s{i}")] == [f"{i}:{k}" for k in range(n_turns)]
    shared_turns = main.stored_turns("shared")
    assert [s.seq for s in shared_turns] == list(range(1, n_threads * n_turns + 1))
    for i in range(n_threads):  # each writer's turns in the order it wrote them
        assert [s.turn.text for s in shared_turns if s.turn.text.startswith(f"{i}:")] == [
            f"{i}:{k}" for k in range(n_turns)
        ]
    assert {r.id: r.turns for r in main.list_sessions(None)} == {
        **{f"s{i}": n_turns for i in range(n_threads)},
        "shared": n_threads * n_turns,
    }
    main.close()


def test_another_process_writes_while_this_one_reads(db):
    store = ConversationStore.open(db)
    store.create_session("p")
    n = 200
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                from core.history import Turn
                from voice.app.store import ConversationStore
                s = ConversationStore.open({str(db)!r}, timeout=30)
                for k in range({n}):
                    s.add_turn("p", Turn("user", f"turn {{k}}"))
                s.close()
            """),
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = 0
    reads = 0
    deadline = time.monotonic() + 60
    while writer.poll() is None and time.monotonic() < deadline:
        texts = [t.text for t in store.turns("p")]
        assert texts == [f"turn {k}" for k in range(len(texts))]  # a prefix, never a torn write
        assert len(texts) >= seen
        seen = len(texts)
        reads += 1
    assert writer.wait(60) == 0, writer.stderr.read()
    assert [t.text for t in store.turns("p")] == [f"turn {k}" for k in range(n)]
    assert reads > 1
    store.close()


# -- bad cases --------------------------------------------------------------


def test_a_file_of_garbage_is_corrupt(tmp_path):
    bad = tmp_path / "garbage.db"
    bad.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(StoreCorrupt) as e:
        ConversationStore.open(bad)
    assert str(bad) in str(e.value) and "corrupt" in str(e.value) and "not a database" in str(e.value)
    assert e.value.path == bad


def test_a_damaged_database_is_corrupt(sqlite_db):
    with ConversationStore.open(sqlite_db) as s:
        s.create_session("x")
        for _ in range(200):
            s.add_turn("x", user("hello world " * 20))
    with open(sqlite_db, "r+b") as f:  # overwrite three pages past the schema
        f.seek(4096 * 2)
        f.write(b"\xff" * 4096 * 3)
    with pytest.raises(StoreCorrupt, match="malformed"), ConversationStore.open(sqlite_db) as s:
        s.turns("x")


def test_another_programs_database_is_refused(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupt, match="not a conversation database"):
        ConversationStore.open(other)


def test_a_newer_schema_is_refused(sqlite_db):
    ConversationStore.open(sqlite_db).close()
    conn = sqlite3.connect(sqlite_db)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        ConversationStore.open(sqlite_db)


def test_missing_database_without_create(tmp_path):
    with pytest.raises(StoreError, match="no conversation database at"):
        ConversationStore.open(tmp_path / "nope.db", create=False)
    assert not (tmp_path / "nope.db").exists()


def test_a_closed_store_raises_store_error(db):
    s = ConversationStore.open(db)
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.list_sessions()


def test_locked_database(sqlite_db):
    store = ConversationStore.open(sqlite_db, timeout=0.1)
    store.create_session("s")
    holder = sqlite3.connect(sqlite_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    t0 = time.monotonic()
    with pytest.raises(StoreLocked) as e:
        store.add_turn("s", user())
    assert time.monotonic() - t0 >= 0.09  # it waited for the lock first
    assert str(sqlite_db) in str(e.value) and "locked" in str(e.value)
    assert store.turns("s") == []  # WAL: readers go on while a writer holds the lock

    recorder = TurnRecorder(store, "s")
    first, second = user("first"), reply("second")
    recorder.record(first)
    assert not recorder.flush()  # the writer waited 0.1 s for the lock, and gave up
    assert isinstance(recorder.error, StoreLocked) and recorder.pending == [first]
    holder.execute("COMMIT")
    recorder.record(second)  # the next change retries what is owed, in order
    assert recorder.flush()
    assert recorder.error is None and recorder.pending == []
    assert [t.text for t in store.turns("s")] == ["first", "second"]
    holder.close()
    store.close()


def test_full_database_keeps_turns_until_there_is_room(sqlite_db, caplog):
    store = ConversationStore.open(sqlite_db)
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    recorder.record(user("before"))
    assert recorder.flush()
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")  # a real SQLITE_FULL
    big = reply("word " * 20000)
    with pytest.raises(StoreFull) as e:
        store.add_turn("s", big)
    assert str(sqlite_db) in str(e.value) and "full" in str(e.value)

    with caplog.at_level("WARNING", logger="voice.app.store"):
        recorder.record(big)
        recorder.record(user("after"))  # in order behind the turn that did not fit
        assert not recorder.flush()
    assert isinstance(recorder.error, StoreFull)
    assert [t.text for t in recorder.pending] == [big.text, "after"]
    assert len([r for r in caplog.records if "memory only" in r.message]) == 1  # logged once
    assert [t.text for t in store.turns("s")] == ["before"]

    store._conn.execute(f"PRAGMA max_page_count = {pages * 1000}")  # space is back
    assert recorder.flush()
    assert recorder.error is None and recorder.pending == []
    assert [t.text for t in store.turns("s")] == ["before", big.text, "after"]
    store.close()


def test_unknown_and_foreign_sessions(store, db):
    with pytest.raises(UnknownSession):
        store.session("nope")
    with pytest.raises(UnknownSession):
        store.add_turn("nope", user())
    with pytest.raises(UnknownSession):
        store.turns("nope")
    store.create_session("mine", owner="secret-token-1")
    store.create_session("open")
    with pytest.raises(SessionExists):
        store.create_session("mine")
    assert store.session("mine", owner="secret-token-1").owned
    with pytest.raises(ForeignSession):
        store.session("mine", owner="secret-token-2")
    with pytest.raises(ForeignSession):
        store.session("mine")
    assert store.session_record("mine").id == "mine"  # for tools run by whoever holds the file
    assert store.session("open", owner="anyone").id == "open"  # created without a token: anyone's
    assert not issubclass(UnknownSession, StoreError) and issubclass(ForeignSession, SessionError)
    assert not any("secret-token-1" in str(row) for row in raw(db, "SELECT * FROM sessions"))
    if isinstance(db, Path):
        assert b"secret-token-1" not in db.read_bytes() + (db.with_name(db.name + "-wal").read_bytes())


def test_find_session_by_prefix(store):
    for sid in ("abc123", "abd456", "xyz"):
        store.create_session(sid)
    assert store.find_session("abc") == "abc123"
    assert store.find_session("xyz") == "xyz"
    with pytest.raises(AmbiguousSession, match="abc123, abd456"):
        store.find_session("ab")
    with pytest.raises(UnknownSession):
        store.find_session("q")
    with pytest.raises(UnknownSession):
        store.find_session("")


def test_list_sessions_most_recent_first(store):
    store.create_session("old")
    store.create_session("new")
    store.add_turn("new", user("hi"))
    time.sleep(0.01)
    store.add_turn("old", user("first words here"))
    listed = store.list_sessions(10)
    assert [(r.id, r.turns, r.last_text) for r in listed] == [("old", 1, "first words here"), ("new", 1, "hi")]
    assert len(store.list_sessions(1)) == 1


# -- the recorder and the history's listener ----------------------------------


class Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def added(self, turn: Turn) -> None:
        self.calls.append(("added", turn.text))

    def changed(self, turn: Turn) -> None:
        self.calls.append(("changed", turn.text))

    def removed(self, turn: Turn) -> None:
        self.calls.append(("removed", turn.text))


def test_history_tells_its_listener():
    calls = Calls()
    h = History(listener=calls)
    u = h.add(user("hello"))
    a = h.add(reply("Hi there, how are you?"))
    a.text, a.interrupted = "Hi there", True
    h.changed(a)
    h.changed(user("not one of ours"))  # not told
    h.remove(a)
    h.remove(a)  # gone already: not told twice
    with pytest.raises(ValueError):
        h.add(user("  "))
    assert calls.calls == [
        ("added", "hello"),
        ("added", "Hi there, how are you?"),
        ("changed", "Hi there"),
        ("removed", "Hi there"),
    ]
    assert h.turns == [u]


def test_history_without_listener_is_unchanged():
    turns = [user("hello"), reply("Hi.", response=3)]
    h = History(turns)
    assert History().turns == [] and h.turns is turns
    assert h.to_json() == [
        {"role": "user", "text": "hello", "t_start": 0.1, "t_end": 1.0},
        {"role": "assistant", "text": "Hi.", "t_start": 1.6, "t_end": 2.4, "generated_text": "Hi.", "response": 3},
    ]
    assert History(turns) == History(list(turns), listener=Calls())  # the listener is not part of equality


def test_a_failing_listener_does_not_break_the_history(caplog):
    class Broken:
        def added(self, turn):
            raise RuntimeError("boom")

        changed = removed = added

    h = History(listener=Broken())
    with caplog.at_level("ERROR", logger="core.history"):
        h.add(user("still here"))
    assert [t.text for t in h.turns] == ["still here"]
    assert "listener failed" in caplog.text


def test_recorder_persists_what_the_history_finalizes(store):
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    h = History(recorder.load(), listener=recorder)
    h.add(user("what time is it"))
    a = h.add(reply("It is noon. The sun is out.", response=1))
    assert recorder.flush()
    assert recorder.seq(a) == 2
    a.text, a.interrupted = "It is noon.", True
    h.changed(a)
    assert recorder.flush()
    assert store.turns("s") == h.turns
    h.remove(a)
    assert recorder.flush()
    assert store.turns("s") == h.turns == [user("what time is it")]
    assert recorder.seq(a) is None

    # resume: a new recorder and history over the same session carry on after the last turn
    again = TurnRecorder(store, "s")
    h2 = History(again.load(), listener=again)
    assert h2.turns == [user("what time is it")]
    b = h2.add(reply("Noon.", response=1))
    assert again.flush()
    assert again.seq(b) == 2  # the removed turn's seq is free again: it was the last
    b.text, b.interrupted = "No", True
    h2.changed(b)
    h2.turns[0].text = "what time is it now"  # a loaded turn can be amended too
    h2.changed(h2.turns[0])
    assert again.flush()
    assert store.turns("s") == h2.turns


def test_recorder_changes_to_turns_still_owed_are_written_once(sqlite_db):
    store = ConversationStore.open(sqlite_db, timeout=0.05)
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    holder = sqlite3.connect(sqlite_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    u, a, gone = user("hello"), reply("It is noon. The sun is out."), reply("never heard", response=2)
    recorder.record(u)
    recorder.record(a)
    recorder.record(gone)
    a.text, a.interrupted = "It is noon.", True
    recorder.amend(a)  # owed already: written as it is then
    recorder.remove(gone)  # never written: nothing to delete
    recorder.record(u)  # twice: once
    assert recorder.pending == [u, a]
    holder.execute("COMMIT")
    assert recorder.flush()
    assert store.turns("s") == [u, a]
    assert recorder.seq(a) == 2 and recorder.seq(gone) is None
    holder.close()
    store.close()


def test_recorder_never_raises_even_on_a_closed_store(db):
    store = ConversationStore.open(db)
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    store.close()
    recorder.record(user())
    assert isinstance(recorder.error, StoreError) and len(recorder.pending) == 1


def test_recorder_on_a_deleted_session(store):
    store.create_session("s")
    recorder = TurnRecorder(store, "s")
    store.delete_session("s")
    recorder.record(user())
    assert not recorder.flush()
    assert isinstance(recorder.error, UnknownSession) and len(recorder.pending) == 1


def test_the_conversation_persists_turns_when_they_are_final_never_before(store):
    """Driven by scripted events, as in test_turns.py: the user's turn at the
    ASR final, the assistant's at playback end, and a reply the client never
    heard (truncate to 0 ms) taken back."""
    store.create_session("c")
    recorder = TurnRecorder(store, "c")
    conv = Conversation("be brief", history=History(listener=recorder))
    conv.speech_started(0.1, 0.35)
    assert recorder.flush()
    assert store.turns("c") == []
    (tf,) = [c for c in conv.speech_ended(1.0, 1.5) if isinstance(c, TranscribeFinal)]
    assert recorder.flush()
    assert store.turns("c") == []
    (start,) = [
        c for c in conv.transcript_final(tf.utterance, "what time is it", 0.1, 1.0, 1.6) if isinstance(c, StartResponse)
    ]
    assert recorder.flush()
    assert [(t.role, t.text) for t in store.turns("c")] == [("user", "what time is it")]
    r = start.response
    (syn,) = [c for c in conv.llm_delta(r, "It is noon. And", 1.7) if isinstance(c, Synthesize)]
    conv.tts_audio(r, syn.chunk, "It is noon.", 100, [Word("It", 20), Word("is", 50), Word("noon.", 100)], 1.8, True)
    conv.tts_done(r, syn.chunk, 1.8)
    conv.played(60, 2.0)
    assert recorder.flush()
    assert len(store.turns("c")) == 1  # playing: nothing partial is stored
    for c in conv.llm_done(r, 2.0):
        if isinstance(c, Synthesize):
            conv.tts_audio(r, c.chunk, c.text, 40, [Word("And", 40)], 2.1, True)
            conv.tts_done(r, c.chunk, 2.1)
    conv.played(40, 2.1)
    assert recorder.flush()
    assert len(store.turns("c")) == 1
    conv.played(40, 2.2)  # playback ends
    assert recorder.flush()
    assert store.turns("c") == conv.history.turns
    assert store.turns("c")[1].text == "It is noon. And"
    conv.truncate(r, 0, 2.5)  # the client says none of it was heard
    assert recorder.flush()
    assert [(t.role, t.text) for t in store.turns("c")] == [("user", "what time is it")]
    assert recorder.error is None


# -- storage on first use: a session is written with its first turn, and pruned with none ------


def _sessions(db: Path | str) -> list[tuple[str, int]]:
    """(id, turns) of every session in the database, read by another connection."""
    count = "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id)"
    return raw(db, f"SELECT s.id, {count} FROM sessions s ORDER BY s.id")


def _age(db: Path | str, session_id: str, seconds: float) -> None:
    """Make the session look created, and last written, ``seconds`` ago."""
    t = time.time() - seconds
    raw(db, "UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = ?", (t, t, session_id))


def test_a_new_session_is_written_with_its_first_turn_in_one_transaction_never_before(sqlite_db):
    store = ConversationStore.open(sqlite_db)
    t0 = time.time()
    sid, history, recorder = open_history(store, None, owner="token", system_prompt="be brief")
    assert recorder.flush() and recorder.error is None  # nothing is owed: nothing to write
    assert not recorder.stored and _sessions(sqlite_db) == []
    with pytest.raises(UnknownSession):
        store.session(sid, owner="token")
    seen = _trace(store)
    t1 = time.time()
    u = history.add(user())
    assert recorder.flush() and recorder.stored
    writes = [sql.split()[0] + (" " + sql.split()[2] if sql.startswith("INSERT") else "") for _, sql in seen]
    assert [w for w in writes if w != "SELECT"] == [
        "BEGIN",
        "INSERT sessions",
        "INSERT turns",
        "UPDATE",
        "COMMIT",
    ]  # the session and its first turn: one transaction
    record = store.session(sid, owner="token")  # the id the conversation had from the start
    assert record.system_prompt == "be brief" and record.turns == 1
    assert t0 <= record.created_at <= t1 <= record.updated_at  # created when the conversation was opened
    assert store.turns(sid) == [u]
    history.add(reply())
    assert recorder.flush() and store.turns(sid) == history.turns and _sessions(sqlite_db) == [(sid, 2)]
    store.close()


def test_a_conversation_in_which_nothing_is_final_leaves_nothing(db):
    """Opened and closed, or a reply taken back before it was written: not a row, not even the session."""
    store = ConversationStore.open(db)
    for _ in range(3):
        open_history(store, None)
    busy = threading.Event()
    store.submit(busy.wait)  # the writer thread is held up: what is handed over next waits behind it
    _, history, recorder = open_history(store, None)
    gone = history.add(reply("never heard"))  # (a conversation starts with the person's turn; the recorder can't tell)
    history.remove(gone)
    assert recorder.pending == []
    busy.set()
    assert recorder.flush() and not recorder.stored and recorder.error is None
    store.close()
    assert _sessions(db) == []


def test_a_store_that_fails_at_the_first_turn_stores_neither_the_session_nor_the_turn(sqlite_db):
    store, pages = _full_store(sqlite_db)
    fillers = len(_sessions(sqlite_db))
    sid, history, recorder = open_history(store, None)
    history.add(user("a long first turn " * 50))
    assert not recorder.flush() and isinstance(recorder.error, StoreFull)
    rows = _sessions(sqlite_db)
    assert not recorder.stored and len(rows) == fillers and sid not in dict(rows)  # rolled back
    store._conn.execute(f"PRAGMA max_page_count = {pages * 1000}")
    assert recorder.flush() and recorder.error is None and recorder.stored
    assert store.turns(sid) == history.turns
    store.close()


def test_resuming_an_id_that_never_spoke_is_unknown(db):
    store = ConversationStore.open(db)
    sid, history, recorder = open_history(store, None)  # the client was told sid, and said nothing
    assert recorder.flush()
    with pytest.raises(UnknownSession):
        open_history(store, sid)
    store.create_session("empty", owner="someone")  # from an earlier version: a row, no turn
    with pytest.raises(UnknownSession, match="no turns"):
        open_history(store, "empty")  # not foreign: there is nothing of anyone's in it
    with pytest.raises(UnknownSession, match="no turns"):
        open_history(store, "empty", owner="someone")
    conversations = Conversations(store)
    opened = conversations.open(sid)  # over the network: said, and a new conversation
    assert [code for code, _ in opened.notices] == ["unknown_session"]
    assert opened.session_id not in (None, sid) and opened.history.turns == [] and opened.store_error is None
    with pytest.raises(UnknownSession):
        conversations.open("empt", strict=True)  # at the command line: an error (a prefix will do)
    # Once it spoke, the same id resumes.
    history.add(user("now I speak"))
    assert recorder.flush()
    again = conversations.open(sid)
    assert again.session_id == sid and again.notices == [] and [t.text for t in again.history.turns] == ["now I speak"]
    store.close()


def test_prune_removes_the_sessions_with_no_turns_untouched_for_a_while(db):
    store = ConversationStore.open(db)
    for sid in ("old-empty-1", "old-empty-2", "fresh-empty", "old-spoken", "emptied-now"):
        store.create_session(sid)
    store.add_turn("old-spoken", user())
    store.add_turn("emptied-now", user())
    for sid in ("old-empty-1", "old-empty-2", "old-spoken", "emptied-now"):
        _age(db, sid, 3600)
    store.delete_turn("emptied-now", 1)  # its last write is now
    dry = store.prune(600, dry_run=True)
    assert [r.id for r in dry] == ["old-empty-1", "old-empty-2"] and all(r.turns == 0 for r in dry)
    assert len(_sessions(db)) == 5  # a dry run removes nothing
    assert [r.id for r in store.prune(600)] == ["old-empty-1", "old-empty-2"]
    assert [s for s, _ in _sessions(db)] == ["emptied-now", "fresh-empty", "old-spoken"]
    assert store.prune(600) == []
    assert [r.id for r in store.prune(0)] == ["emptied-now", "fresh-empty"]  # no grace at all
    assert _sessions(db) == [("old-spoken", 1)]  # a session with a turn stays, however old
    store.close()


def test_prune_soon_runs_on_the_writer_thread(sqlite_db, caplog):
    store = ConversationStore.open(sqlite_db)
    store.create_session("old")
    _age(sqlite_db, "old", 3600)
    seen = _trace(store)
    caller = threading.current_thread().name
    with caplog.at_level("INFO", logger="voice.app.store"):
        store.prune_soon()
        assert store.flush()
    assert _sessions(sqlite_db) == []
    assert seen and {name for name, _ in seen} == {store._writer.name} != {caller}
    assert "pruned 1 sessions with no turns" in caplog.text
    store.close()


def test_prune_beside_live_conversations_never_removes_one(db):
    """The most eager prune (no grace), over and over, from another
    connection, while conversations get their first turns: every one of them
    keeps its session and every turn, with no error."""
    store = ConversationStore.open(db, timeout=30)
    pruner = ConversationStore.open(db, timeout=30)
    stop = threading.Event()
    pruned: list[str] = []

    def prune() -> None:
        while not stop.is_set():
            pruned.extend(r.id for r in pruner.prune(0))

    thread = threading.Thread(target=prune)
    thread.start()
    try:
        conversations = [open_history(store, None) for _ in range(40)]
        for k in range(3):
            for _, history, _ in conversations:
                history.add(user(f"turn {k}") if k % 2 == 0 else reply(f"turn {k}"))
            time.sleep(0.01)
        for _, _, recorder in conversations:
            assert recorder.flush() and recorder.error is None and recorder.stored
    finally:
        stop.set()
        thread.join(60)
    assert pruned == []
    assert sorted(_sessions(db)) == sorted((sid, 3) for sid, _, _ in conversations)
    for sid, history, _ in conversations:
        assert store.turns(sid) == history.turns
    pruner.close()
    store.close()


# -- PostgreSQL: a server shared by workers ------------------------------------


def test_a_database_url_of_another_kind_is_refused_in_one_line_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for url in ("mysql://me:secret@db.example/voice", "file:///tmp/x.db", "redis://localhost"):
        with pytest.raises(UnsupportedDatabase, match="is not a database this program") as e:
            ConversationStore.open(url)
        assert "secret" not in str(e.value) and "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no folder named "mysql:" (it was once made for postgresql://)


def test_a_sqlite_url_is_a_file(tmp_path):
    with ConversationStore.open(f"sqlite://{tmp_path}/c.db") as s:
        s.create_session("a")
    assert (tmp_path / "c.db").is_file()


def test_an_unreachable_server_is_said_with_its_url_and_no_password():
    with pytest.raises(StoreUnreachable, match="cannot be reached") as e:
        ConversationStore.open("postgresql://voice:hunter2@127.0.0.1:9/voice", timeout=0.5)
    assert "hunter2" not in str(e.value) and "127.0.0.1:9" in str(e.value)


def test_a_server_that_goes_away_mid_conversation_loses_nothing(postgres):
    """Killed (as by a crash) between two turns: the turn written then is kept in memory and said;
    once the server is back the next change writes everything, in order, and reads work again."""
    url = postgres.create_database("goes_away")
    store = ConversationStore.open(url, timeout=1.0)
    sid, history, recorder = open_history(store, None)
    history.add(user("before"))
    assert recorder.flush() and recorder.error is None
    postgres.stop("immediate")
    try:
        history.add(reply("during"))
        assert not recorder.flush(15)
        assert isinstance(recorder.error, StoreUnreachable) and "cannot be reached" in str(recorder.error)
        assert [t.text for t in recorder.pending] == ["during"]
        with pytest.raises(StoreUnreachable):
            store.turns(sid)
    finally:
        postgres.start()
    history.add(user("after"))
    assert recorder.flush(15) and recorder.error is None and recorder.pending == []
    assert [t.text for t in store.turns(sid)] == ["before", "during", "after"]
    store.close()


def test_a_session_row_held_by_another_worker_is_a_lock_error_then_written(postgres):
    import psycopg

    url = postgres.create_database("row_lock")
    store = ConversationStore.open(url, timeout=0.3)
    sid, history, recorder = open_history(store, None)
    history.add(user("first"))
    assert recorder.flush()
    other = psycopg.connect(url)  # a transaction of its own, holding the session's row
    other.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (sid,))
    history.add(reply("held back"))
    assert not recorder.flush(10) and isinstance(recorder.error, StoreLocked)
    other.rollback()
    other.close()
    assert recorder.flush(10) and [t.text for t in store.turns(sid)] == ["first", "held back"]
    store.close()


def test_tables_of_another_program_are_refused(postgres):
    url = postgres.create_database("not_ours")
    postgres.sql("CREATE TABLE sessions (id TEXT)", "not_ours")
    with pytest.raises(StoreCorrupt, match="not a conversation store"):
        ConversationStore.open(url)


def test_workers_opening_a_new_database_at_once_create_it_once(postgres):
    url = postgres.create_database("racing")
    stores: list[ConversationStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(ConversationStore.open(url, timeout=10))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(stores) == 4
    assert raw(url, "SELECT COUNT(*) FROM schema_version") == [(1,)]
    stores[0].create_session("x", owner="tok")
    assert all(s.session("x", owner="tok").owned for s in stores)  # one salt for all
    for s in stores:
        s.close()


# -- text the database cannot encode --------------------------------------------

LONE = "\ud800"  # a lone surrogate: JSON allows it (a DTMF digit once carried one), UTF-8 has no encoding for it


def test_text_the_database_cannot_encode_is_stored_cleaned_never_a_lost_turn(store, db, caplog):
    """Every text column (user and assistant text, a tool's arguments and result, metadata, the
    session's prompt and meta) stores U+FFFD for what it cannot encode, and the turn is kept: before,
    the driver refused the write ("persisting a turn failed") and the turn was lost."""
    from core.history import ToolUse

    nul = "\x00" if not isinstance(db, Path) else ""  # PostgreSQL's text cannot hold NUL either
    meta = {"digits": f"1{LONE}", f"key{LONE}": [LONE, {"deep": LONE}]}
    with caplog.at_level("WARNING", logger="voice.app.store"):
        sid, history, recorder = open_history(
            store, None, owner=f"token{LONE}", system_prompt=f"be brief{LONE}{nul}", meta=meta
        )
        history.add(user(f"press {LONE}{nul} now"))
        call = ToolUse(f"call{LONE}", f"dial{LONE}", '{"digit": "' + LONE + '"}', "ok", 0.01)
        history.add(Turn("tool", f"dialled {LONE}{nul}", t_start=1.0, t_end=1.1, response=1, tool=call))
        history.add(
            Turn(
                "assistant",
                f"You pressed {LONE}{nul}.",
                t_start=1.6,
                t_end=2.4,
                generated_text=f"You pressed {LONE}. {nul}Anything else?",
                response=1,
                extra={"lang": f"en{LONE}", f"k{LONE}": LONE},
            )
        )
        assert recorder.flush()
    assert recorder.error is None and recorder.pending == [] and recorder.stored
    assert "failed" not in caplog.text and "memory only" not in caplog.text
    clean = nul.replace("\x00", "\ufffd")
    back = store.turns(sid)
    assert [t.text for t in back] == [
        f"press \ufffd{clean} now",
        f"dialled \ufffd{clean}",
        f"You pressed \ufffd{clean}.",
    ]
    assert back[1].tool == ToolUse("call\ufffd", "dial\ufffd", '{"digit": "\ufffd"}', "ok", 0.01)
    assert back[2].generated_text == f"You pressed \ufffd. {clean}Anything else?"
    assert back[2].extra == {"lang": "en\ufffd", "k\ufffd": "\ufffd"}
    rec = store.session(sid, owner=f"token{LONE}")  # the owner's token still opens it
    assert rec.system_prompt == f"be brief\ufffd{clean}" and rec.last_text == f"You pressed \ufffd{clean}."
    assert rec.meta == {"digits": "1\ufffd", "key\ufffd": ["\ufffd", {"deep": "\ufffd"}]}
    with pytest.raises(ForeignSession):
        store.session(sid, owner="token")  # a surrogate is not dropped from the token: another token
    for turn in back:  # every text reads back as one anything can print or send
        (turn.text + (turn.generated_text or "")).encode("utf-8")
    # asked for by such an id, the store answers as for any unknown id
    with pytest.raises(UnknownSession):
        store.session(f"{sid[:8]}{LONE}")
    with pytest.raises(UnknownSession):
        store.find_session(LONE)
    with pytest.raises(UnknownSession):
        open_history(store, f"{sid}{LONE}")


def test_storable_cleans_only_what_cannot_be_encoded():
    from voice.app.databases import storable

    text = "héllo 😀 \x00"
    assert storable(text) is text  # nothing to clean: the same object
    assert storable(f"a{LONE}b") == "a\ufffdb"
    assert storable("\ud83d\ude00") == "😀"  # a surrogate pair is its character
    assert storable(("x", 1, None, [f"{LONE}"], {LONE: (LONE,)})) == ("x", 1, None, ["\ufffd"], {"\ufffd": ("\ufffd",)})

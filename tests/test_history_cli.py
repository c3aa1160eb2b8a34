"""`python -m voice.history` as a person runs it, on a database filled with the
store's API: list, show, export as JSON and Markdown, each turn with its
wall-clock time beside its span on the session's timeline; a database of
schema version 1 still reads; an unknown id, a missing or corrupt database are
one line and exit code 2; prune removes the sessions with no turns. On an
SQLite file and on a PostgreSQL server (``--db postgresql://...``)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.history import Turn
from tests.conftest import ROOT, raw
from voice.app.store import ConversationStore

SID = "3f2a9c0d41b84e0b9e6f0a1b2c3d4e5f"
OTHER = "3f99aa00000000000000000000000000"
NEW_YEAR = 1767225600.0  # 2026-01-01 00:00:00 UTC: when the turns were finalized (TZ=UTC below)


def history(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "voice.history", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TZ": "UTC", **(env or {})},
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


_DATABASES = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Path | str:
    """A conversation database to read: a file, or a database on the test's PostgreSQL server."""
    if request.param == "sqlite":
        path: Path | str = tmp_path / "conversations.db"
    else:
        path = request.getfixturevalue("postgres").create_database(f"cli{next(_DATABASES)}")
    with ConversationStore.open(path) as s:
        s.create_session(SID, owner="a-token", system_prompt="Answer in one short sentence.")
        turns = [
            Turn("user", "What's the weather like today?", t_start=0.42, t_end=2.1),
            Turn(
                "assistant",
                "It is sunny and",
                t_start=2.6,
                t_end=3.9,
                generated_text="It is sunny and warm, with a light breeze from the west.",
                interrupted=True,
                response=1,
            ),
            Turn("user", "Will it rain tomorrow?", t_start=4.0, t_end=5.2),
            Turn(
                "assistant", "No, tomorrow stays dry.", 5.8, 7.1, generated_text="No, tomorrow stays dry.", response=2
            ),
        ]
        for turn in turns:
            s.add_turn(SID, turn, finalized_at=NEW_YEAR + turn.t_end + 0.3)
        s.create_session(OTHER)
    return path


def test_list(db):
    proc = history("list", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["ID", "CREATED", "UPDATED", "TURNS", "LAST"]
    row = next(line for line in lines if line.startswith(SID))
    assert " 4 " in row and "No, tomorrow stays dry." in row
    assert any(line.startswith(OTHER) for line in lines)


def test_list_of_an_empty_database(tmp_path):
    ConversationStore.open(tmp_path / "empty.db").close()
    proc = history("--db", str(tmp_path / "empty.db"), "list")
    assert proc.returncode == 0 and "no conversations" in proc.stdout


def test_the_database_from_the_environment(db):
    proc = history("list", env={"VOICE_DB": str(db)})
    assert proc.returncode == 0 and SID in proc.stdout


def test_show_by_unique_prefix(db):
    proc = history("show", SID[:6], "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"session {SID}" in out and "Answer in one short sentence." in out
    lines = out.splitlines()
    turn_lines = [line for line in lines if " user " in line or " assistant " in line]
    assert [("user" if " user " in line else "assistant") for line in turn_lines] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert "0.42-2.10 s" in turn_lines[0] and "What's the weather like today?" in turn_lines[0]
    # the wall clock beside the session's timeline (with the date: not the day the session was created)
    assert turn_lines[0].startswith("2026-01-01 00:00:02  0.42-2.10 s  user ")
    assert turn_lines[3].startswith("2026-01-01 00:00:07  5.80-7.10 s  assistant ")
    assert "It is sunny and" in turn_lines[1] and "interrupted: heard 4 of 12 words" in turn_lines[1]
    assert "generated: It is sunny and warm, with a light breeze from the west." in out
    assert out.count("generated:") == 1  # only where it differs from what was heard


def test_export_json(db):
    proc = history("export", SID, "--format", "json", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (session,) = doc["sessions"]
    assert session["id"] == SID and session["system_prompt"] == "Answer in one short sentence."
    assert "owner" not in session and "a-token" not in proc.stdout
    turns = session["turns"]
    assert [t["seq"] for t in turns] == [1, 2, 3, 4]
    assert turns[1] == {
        "seq": 2,
        "role": "assistant",
        "text": "It is sunny and",
        "interrupted": True,
        "generated_text": "It is sunny and warm, with a light breeze from the west.",
        "t_start": 2.6,
        "t_end": 3.9,
        "audio_s": 1.3,
        "response": 1,
        "created_at": turns[1]["created_at"],
        "finalized_at": "2026-01-01T00:00:04.200+00:00",
    }
    assert turns[0]["interrupted"] is False and turns[0]["generated_text"] is None
    both = json.loads(history("export", SID[:4] + "9c", OTHER, "--db", str(db)).stdout)  # json is the default
    assert [s["id"] for s in both["sessions"]] == [SID, OTHER] and both["sessions"][1]["turns"] == []


def test_export_markdown(db):
    proc = history("--db", str(db), "export", SID, "--format", "md")
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith(f"# Conversation `{SID}`")
    assert "**User** (0.42-2.10 s, at 2026-01-01 00:00:02): What's the weather like today?" in md
    assert "**Assistant** (2.60-3.90 s, at 2026-01-01 00:00:04): It is sunny and *[interrupted]*" in md
    assert "> *generated:* It is sunny and warm, with a light breeze from the west." in md
    assert "**Assistant** (5.80-7.10 s, at 2026-01-01 00:00:07): No, tomorrow stays dry." in md


def test_a_database_of_schema_version_1_reads_without_wall_clock_times(tmp_path):
    old = tmp_path / "v1.db"
    conn = sqlite3.connect(old)
    conn.executescript((ROOT / "tests" / "fixtures" / "conversations_v1.sql").read_text())
    conn.close()
    sid = "01d5e55101d5e55101d5e55101d5e551"
    proc = history("show", sid[:6], "--db", str(old))
    assert proc.returncode == 0, proc.stderr
    turn_lines = [line for line in proc.stdout.splitlines() if " user " in line or " assistant " in line]
    assert turn_lines[0].startswith("0.42-2.10 s  user ")  # no wall-clock time: none was stored
    assert "interrupted: heard 4 of 5 words" in turn_lines[1]
    doc = json.loads(history("export", sid, "--db", str(old)).stdout)
    assert [t["finalized_at"] for t in doc["sessions"][0]["turns"]] == [None, None]
    md = history("export", sid, "--format", "md", "--db", str(old)).stdout
    assert "**User** (0.42-2.10 s): What's the weather like today?" in md


def test_unknown_id(db):
    assert_one_line_error(history("show", "nope", "--db", str(db)), "no session 'nope'")
    assert_one_line_error(history("export", "nope", "--format", "md", "--db", str(db)), "no session 'nope'")


def test_ambiguous_prefix(db):
    assert_one_line_error(history("show", "3f", "--db", str(db)), "ambiguous", SID, OTHER)


def test_missing_database(tmp_path):
    missing = tmp_path / "nope.db"
    assert_one_line_error(history("list", "--db", str(missing)), "no conversation database at", str(missing))
    assert not missing.exists()  # looking does not create it


def test_corrupt_database(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 200)
    for args in (["list"], ["show", SID], ["export", SID, "--format", "json"]):
        assert_one_line_error(history(*args, "--db", str(bad)), "corrupt", str(bad))


def _age(db: Path | str, *ids: str, seconds: float = 3600) -> None:
    """Make the sessions look created, and last written, ``seconds`` ago."""
    t = time.time() - seconds
    for i in ids:
        raw(db, "UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = ?", (t, t, i))


def _ids(db: Path | str) -> list[str]:
    return [r[0] for r in raw(db, "SELECT id FROM sessions ORDER BY id")]


@pytest.fixture
def littered(db) -> Path:
    """The conversation, a session with no turns made moments ago, and 3 made an hour ago (as
    earlier versions left one for every connection that never spoke)."""
    with ConversationStore.open(db) as s:
        for i in range(3):
            s.create_session(f"empty{i}")
    _age(db, SID, "empty0", "empty1", "empty2")
    return db


def test_prune_dry_run_lists_and_removes_nothing(littered):
    proc = history("prune", "--dry-run", "--db", str(littered))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["empty0", "empty1", "empty2"]
    assert lines[-1] == (
        f"would remove 3 sessions with no turns, untouched for 10m, from {littered} (dry run: nothing removed)"
    )
    assert _ids(littered) == sorted([SID, OTHER, "empty0", "empty1", "empty2"])


def test_prune_removes_the_sessions_with_no_turns(littered):
    proc = history("--db", str(littered), "prune")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"removed 3 sessions with no turns, untouched for 10m, from {littered}\n"
    # The conversation stays, however old; so does the empty one made moments ago (it may be open now).
    assert _ids(littered) == sorted([SID, OTHER])
    assert history("prune", "--db", str(littered)).stdout.startswith("removed 0 sessions")
    proc = history("prune", "--older-than", "0", "--db", str(littered))
    assert proc.stdout.startswith("removed 1 session with no turns, untouched for 0s,")
    assert _ids(littered) == [SID]
    assert " 4 " in history("list", "--db", str(littered)).stdout


def test_prune_older_than(littered):
    _age(littered, "empty0", seconds=3 * 86400)
    assert history("prune", "--older-than", "2d", "--db", str(littered)).stdout.startswith("removed 1 session ")
    assert (
        history("prune", "--older-than", "90", "--dry-run", "--db", str(littered))
        .stdout.splitlines()[-1]
        .startswith("would remove 2 sessions with no turns, untouched for 90s,")
    )
    for bad in ("soon", "-1m", "m"):
        proc = history("prune", f"--older-than={bad}", "--db", str(littered))
        assert proc.returncode == 2 and "not a duration" in proc.stderr and "Traceback" not in proc.stderr


def test_prune_a_missing_or_corrupt_database(tmp_path):
    missing = tmp_path / "nope.db"
    assert_one_line_error(history("prune", "--db", str(missing)), "no conversation database at", str(missing))
    assert not missing.exists()
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 200)
    assert_one_line_error(history("prune", "--db", str(bad)), "corrupt", str(bad))


def test_voice_run_prunes_the_same_way_when_it_opens_the_store(littered, caplog):
    from voice.app.cli import open_store

    with caplog.at_level("INFO", logger="voice.app.store"):
        store = open_store(argparse.Namespace(db=littered))
        store.close()  # waits for the writer thread, which pruned before anything else
    assert _ids(littered) == sorted([SID, OTHER])
    assert "pruned 3 sessions with no turns" in caplog.text


def test_a_tool_turn_is_shown_and_exported_with_its_call(tmp_path):
    from core.history import ToolUse

    path = tmp_path / "tools.db"
    call = ToolUse("call_1_0_0", "set_timer", '{"minutes": 5, "label": "tea"}', "ok", 0.004)
    with ConversationStore.open(path) as s:
        s.create_session(SID)
        s.add_turn(SID, Turn("user", "Set a tea timer for five minutes.", t_start=0.4, t_end=2.2))
        s.add_turn(SID, Turn("tool", "timer set for 5 min (tea)", t_start=2.9, t_end=2.904, response=1, tool=call))
        s.add_turn(SID, Turn("assistant", "Your tea timer is set.", t_start=3.1, t_end=4.5, response=1))
    env = {"VOICE_DB": str(path)}
    shown = history("show", SID[:6], env=env)
    assert shown.returncode == 0, shown.stderr
    assert (
        'tool       set_timer({"minutes": 5, "label": "tea"}) -> ok in 0.00 s: timer set for 5 min (tea)'
        in shown.stdout
    )
    exported = history("export", SID[:6], "--format", "json", env=env)
    turns = json.loads(exported.stdout)["sessions"][0]["turns"]
    assert turns[1]["role"] == "tool" and turns[1]["tool"] == {
        "call_id": "call_1_0_0",
        "name": "set_timer",
        "arguments": '{"minutes": 5, "label": "tea"}',
        "status": "ok",
        "duration_s": 0.004,
    }
    markdown = history("export", SID[:6], "--format", "md", env=env)
    assert "**Tool**" in markdown.stdout and "`set_timer({" in markdown.stdout


def test_a_phone_call_is_shown_with_its_caller(tmp_path):
    path = tmp_path / "calls.db"
    meta = {"channel": "twilio", "caller": "+15550199", "call_sid": "CA456", "stream_sid": "MZ1", "account_sid": "AC1"}
    with ConversationStore.open(path) as s:
        s.create_session(SID, meta=meta)
        s.add_turn(SID, Turn("assistant", "Hello, thanks for calling.", t_start=0.1, t_end=1.6))
    env = {"VOICE_DB": str(path)}
    shown = history("show", SID[:6], env=env)
    assert "twilio call from +15550199 (call_sid CA456, stream_sid MZ1)" in shown.stdout, shown.stdout
    exported = json.loads(history("export", SID[:6], "--format", "json", env=env).stdout)
    assert exported["sessions"][0]["meta"] == meta
    assert "A twilio call from +15550199." in history("export", SID[:6], "--format", "md", env=env).stdout


def test_a_turn_heard_in_another_language_is_shown_with_it(tmp_path):
    path = tmp_path / "languages.db"
    with ConversationStore.open(path) as s:
        s.create_session(SID)
        s.add_turn(SID, Turn("user", "¿Qué hora es?", t_start=0.4, t_end=1.6, extra={"language": "es"}))
        s.add_turn(SID, Turn("assistant", "Son las doce.", t_start=2.1, t_end=3.0, response=1))
    shown = history("show", SID[:6], env={"VOICE_DB": str(path)})
    assert shown.returncode == 0, shown.stderr
    assert "user       [es] ¿Qué hora es?" in shown.stdout
    assert "assistant  Son las doce." in shown.stdout
    exported = history("export", SID[:6], "--format", "json", env={"VOICE_DB": str(path)})
    assert json.loads(exported.stdout)["sessions"][0]["turns"][0]["extra"] == {"language": "es"}

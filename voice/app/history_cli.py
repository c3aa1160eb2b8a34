"""``python -m voice.history``: the stored conversations, for people.

    python -m voice.history list [--limit N]               the sessions, most recent first
    python -m voice.history show ID                        one conversation as a person reads it
    python -m voice.history export ID... --format json|md  sessions and their turns
        [--audio DIR]                                      ... and their recordings (--record), copied
    python -m voice.history prune [--dry-run] [--older-than 10m]  remove the sessions with no turns

``--db PATH`` (before or after the command) picks the database; by default
``$VOICE_DB`` or ``~/.local/share/voice/conversations.db``. An id may be
shortened to any prefix that only one session has. A missing or damaged
database, an unknown id: one line on stderr and exit code 2.

Two times per turn: its span on the session's timeline (``t_start``-``t_end``,
seconds) and, beside it, the wall-clock time it was finalized (last changed,
for a reply cut after the fact): local time in ``show`` and Markdown, ISO 8601
UTC (``finalized_at``) in JSON. A turn stored before schema version 2 has no
wall-clock time.

``prune`` removes the sessions in which nothing was ever said (earlier
versions stored one for every connection; this one stores a session with its
first turn), once untouched for ``--older-than`` (10 minutes by default), and
says how many; ``--dry-run`` lists them and removes nothing. It is safe beside
a running server: a conversation going on now is never without a turn.
``voice.run`` prunes the same way each time it starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from voice.app.store import (
    PRUNE_AFTER_S,
    ConversationStore,
    SessionError,
    SessionRecord,
    StoredTurn,
    StoreError,
    default_db_path,
)

PROG = "python -m voice.history"


def _local(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds") if t is not None else None


def _wall(t: float | None, day: str) -> str:
    """A wall-clock time as a person reads it: the local time of day, with the date unless it is ``day``."""
    if t is None:
        return ""
    local = time.localtime(t)
    return time.strftime("%H:%M:%S" if time.strftime("%Y-%m-%d", local) == day else "%Y-%m-%d %H:%M:%S", local)


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def _first_words(text: str | None, n: int = 8) -> str:
    if not text:
        return ""
    words = text.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")


def _span(t_start: float | None, t_end: float | None) -> str:
    if t_start is None and t_end is None:
        return ""
    a = f"{t_start:.2f}" if t_start is not None else "?"
    b = f"{t_end:.2f}" if t_end is not None else "?"
    return f"{a}-{b} s"


# -- list ------------------------------------------------------------------


def cmd_list(store: ConversationStore, args: argparse.Namespace) -> int:
    sessions = store.list_sessions(args.limit)
    if not sessions:
        print(f"no conversations in {store.location}")
        return 0
    rows = [("ID", "CREATED", "UPDATED", "TURNS", "LAST")]
    for s in sessions:
        rows.append((s.id, _local(s.created_at), _local(s.updated_at), str(s.turns), _first_words(s.last_text)))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]:>{w[3]}}  {r[4]}".rstrip())
    return 0


# -- show ------------------------------------------------------------------


def _show(session: SessionRecord, turns: list[StoredTurn]) -> str:
    lines = [f"session {session.id}", f"created {_local(session.created_at)}, updated {_local(session.updated_at)}"]
    if session.system_prompt:
        lines.append(f"system prompt: {session.system_prompt}")
    call = session.meta
    if call.get("channel"):  # a phone call: who called, and its ids
        ids = ", ".join(f"{k} {call[k]}" for k in ("call_sid", "stream_sid") if call.get(k))
        lines.append(
            f"{call['channel']} call from {call.get('caller') or 'an unknown number'}" + (f" ({ids})" if ids else "")
        )
    lines.append(f"{len(turns)} turn{'s' if len(turns) != 1 else ''}")
    lines.append("")
    day = _day(session.created_at)
    width = max((len(_span(s.turn.t_start, s.turn.t_end)) for s in turns), default=0)
    wall_width = max((len(_wall(s.finalized_at, day)) for s in turns), default=0)
    for s in turns:
        t = s.turn
        span = _span(t.t_start, t.t_end).rjust(width)
        wall = _wall(s.finalized_at, day).rjust(wall_width)
        head = f"{wall}  {span}  {t.role:<9}  " if wall_width else f"{span}  {t.role:<9}  "
        pad = " " * len(head)
        text = t.text
        if t.extra.get("language"):  # the language it was heard in (sessions not held to English)
            text = f"[{t.extra['language']}] {text}"
        if t.tool is not None:
            c = t.tool
            text = f"{c.name}({c.arguments}) -> {c.status} in {c.duration_s:.2f} s: {t.text}"
        if t.interrupted:
            total = len((t.generated_text or "").split())
            of = f" of {total}" if total else ""
            text += f"  [interrupted: heard {len(t.text.split())}{of} words]"
        lines.append(head + text)
        if t.generated_text is not None and (t.interrupted or t.generated_text.strip() != t.text.strip()):
            lines.append(f"{pad}generated: {t.generated_text}")
        timed = t.t_start is not None and t.t_end is not None
        if s.audio_s is not None and not (timed and abs(s.audio_s - (t.t_end - t.t_start)) < 0.005):
            lines.append(f"{pad}audio: {s.audio_s:.2f} s")
    return "\n".join(lines)


def cmd_show(store: ConversationStore, args: argparse.Namespace) -> int:
    sid = store.find_session(args.id)
    print(_show(store.session_record(sid), store.stored_turns(sid)))
    return 0


# -- export ----------------------------------------------------------------


def _turn_json(s: StoredTurn) -> dict[str, Any]:
    t = s.turn
    d: dict[str, Any] = {
        "seq": s.seq,
        "role": t.role,
        "text": t.text,
        "interrupted": t.interrupted,
        "generated_text": t.generated_text,
        "t_start": t.t_start,
        "t_end": t.t_end,
        "audio_s": s.audio_s,
        "response": t.response,
        "created_at": _iso(s.created_at),
        "finalized_at": _iso(s.finalized_at),
    }
    if t.tool is not None:
        d["tool"] = dataclasses.asdict(t.tool)  # call_id, name, arguments, status, duration_s, server
        if not t.tool.server:
            del d["tool"]["server"]  # a tool of the session's own, exported as it always was
    if t.extra:
        d["extra"] = t.extra
    return d


def _session_json(session: SessionRecord, turns: list[StoredTurn]) -> dict[str, Any]:
    return {
        "id": session.id,
        "created_at": _iso(session.created_at),
        "updated_at": _iso(session.updated_at),
        "system_prompt": session.system_prompt,
        "meta": session.meta,
        "turns": [_turn_json(s) for s in turns],
    }


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_").replace("`", "\\`")


def _markdown(session: SessionRecord, turns: list[StoredTurn]) -> str:
    out = [f"# Conversation `{session.id}`", ""]
    out.append(f"Created {_local(session.created_at)}, updated {_local(session.updated_at)}, {len(turns)} turns.")
    out.append("")
    if session.system_prompt:
        out += [f"> **System:** {_md_escape(session.system_prompt)}", ""]
    if session.meta.get("channel"):
        caller = session.meta.get("caller") or "an unknown number"
        out += [f"A {_md_escape(str(session.meta['channel']))} call from {_md_escape(str(caller))}.", ""]
    day = _day(session.created_at)
    for s in turns:
        t = s.turn
        who = {"user": "User", "assistant": "Assistant"}.get(t.role, "Tool")
        when = [_span(t.t_start, t.t_end)]
        if s.finalized_at is not None:
            when.append(f"at {_wall(s.finalized_at, day)}")
        when = [w for w in when if w]
        head = f"**{who}**" + (f" ({', '.join(when)})" if when else "") + ":"
        body = _md_escape(t.text)
        if t.tool is not None:
            c = t.tool
            call = f"`{c.name}({c.arguments})` → {c.status}, {c.duration_s:.2f} s"
            body = f"{call}: {body}"
        if t.interrupted:
            body += " *[interrupted]*"
        out += [f"{head} {body}", ""]
        if t.generated_text is not None and (t.interrupted or t.generated_text.strip() != t.text.strip()):
            out += [f"> *generated:* {_md_escape(t.generated_text)}", ""]
    return "\n".join(out).rstrip() + "\n"


def cmd_export(store: ConversationStore, args: argparse.Namespace) -> int:
    ids: list[str] = []
    for prefix in args.ids:
        sid = store.find_session(prefix)
        if sid not in ids:
            ids.append(sid)
    data = [(store.session_record(sid), store.stored_turns(sid)) for sid in ids]
    missing = _copy_recordings([s for s, _ in data], args.audio) if args.audio is not None else 0
    if args.format == "json":
        doc = {"sessions": [_session_json(s, t) for s, t in data]}
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(_markdown(s, t).rstrip() for s, t in data))
    return 1 if missing else 0


def _copy_recordings(sessions: list[SessionRecord], folder: Path) -> int:
    """Copy the sessions' recordings (``--record``, named in their meta) into ``folder``; how many are missing."""
    folder.mkdir(parents=True, exist_ok=True)
    copied = missing = 0
    for session in sessions:
        for name in session.meta.get("recordings") or []:
            source = Path(name)
            if not source.is_file():
                print(f"{PROG}: {session.id}: its recording {source} is missing", file=sys.stderr)
                missing += 1
                continue
            shutil.copy2(source, folder / source.name)
            copied += 1
    print(f"copied {copied} recording{'s' if copied != 1 else ''} into {folder}", file=sys.stderr)
    return missing


# -- prune -----------------------------------------------------------------

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``2h``, ``1d``: seconds."""
    value, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        seconds = float(value) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30s, 10m, 2h, 1d)") from None
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30s, 10m, 2h, 1d)")
    return seconds


def _age(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{seconds // n:g}{unit}"
    return f"{seconds:g}s"


def cmd_prune(store: ConversationStore, args: argparse.Namespace) -> int:
    pruned = store.prune(args.older_than, dry_run=args.dry_run)
    what = f"session{'s' if len(pruned) != 1 else ''} with no turns, untouched for {_age(args.older_than)}"
    if args.dry_run:
        for s in pruned:
            print(f"{s.id}  created {_local(s.created_at)}")
        print(f"would remove {len(pruned)} {what}, from {store.location} (dry run: nothing removed)")
    else:
        print(f"removed {len(pruned)} {what}, from {store.location}")
    return 0


# -- main ------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"the conversation database: a file, or postgresql://... (default: $VOICE_DB or {default_db_path()})",
    )
    p = argparse.ArgumentParser(prog=PROG, description="The stored conversations.", parents=[db])
    sub = p.add_subparsers(dest="command", required=True, metavar="list|show|export|prune")
    ls = sub.add_parser("list", parents=[db], help="the sessions, most recently updated first")
    ls.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0: all)")
    show = sub.add_parser("show", parents=[db], help="one conversation as a person reads it")
    show.add_argument("id", help="a session id, or a prefix only one session has")
    ex = sub.add_parser("export", parents=[db], help="sessions and their turns, as JSON or Markdown")
    ex.add_argument("ids", nargs="+", metavar="ID", help="session ids, or prefixes")
    ex.add_argument("--format", choices=("json", "md"), default="json")
    ex.add_argument(
        "--audio",
        type=Path,
        metavar="DIR",
        help="copy the conversations' recordings (stereo WAVs, kept by --record) into DIR",
    )
    pr = sub.add_parser("prune", parents=[db], help="remove the sessions with no turns (nothing was said in them)")
    pr.add_argument("--dry-run", action="store_true", help="list them, and remove nothing")
    pr.add_argument(
        "--older-than",
        type=_duration,
        default=PRUNE_AFTER_S,
        metavar="AGE",
        help=f"only those untouched this long: 30s, 10m, 2h, 1d (default {_age(PRUNE_AFTER_S)})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = getattr(args, "db", None) or default_db_path()
    if args.command == "list" and args.limit is not None and args.limit <= 0:
        args.limit = None
    commands = {"list": cmd_list, "show": cmd_show, "export": cmd_export, "prune": cmd_prune}
    try:
        with ConversationStore.open(path, create=False) as store:
            return commands[args.command](store, args)
    except (StoreError, SessionError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # | head: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0

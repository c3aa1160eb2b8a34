"""vLLM's IPC sockets: each process's in a folder of its own, swept by the next start once that process
is gone (llm/engine_files.py): a killed engine leaves its sockets behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from llm.engine_files import sweep_sockets


def _socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the file stays, as a killed process's does


def test_the_folders_of_processes_gone_and_old_loose_sockets_are_swept(tmp_path: Path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, alive = tmp_path / gone.stdout.strip(), tmp_path / str(os.getpid())
    for folder in (dead, alive):
        folder.mkdir()
        _socket(folder / "engine")
    old, new = tmp_path / "old-uuid", tmp_path / "new-uuid"
    _socket(old)
    _socket(new)
    day_ago = time.time() - 2 * 86400
    os.utime(old, (day_ago, day_ago), follow_symlinks=False)
    (tmp_path / "notes.txt").write_text("not ours")
    sweep_sockets(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "new-uuid", "notes.txt"])
    assert (alive / "engine").exists()
    sweep_sockets(tmp_path / "missing")  # nothing to sweep: nothing happens

"""Where vLLM writes its files: folders of ours, not ~/.cache and /tmp, and no socket left behind.

vLLM leaves its IPC sockets behind when its process is killed (1,798 had piled up in two days of
tests), so each process's go to a folder of its own, which the next start sweeps once that
process is gone (:func:`sweep_sockets`).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


def sweep_sockets(folder: Path, stale_s: float = 86400.0) -> None:
    """Remove from ``folder`` the socket folders of processes that are gone, and loose sockets (the
    layout before them) older than ``stale_s``: nothing a running engine still listens on."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        try:
            if entry.is_dir() and entry.name.isdigit() and not _alive(int(entry.name)):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_socket() and time.time() - entry.lstat().st_mtime > stale_s:
                entry.unlink()
        except OSError:  # another start sweeping the same folder
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's
        return True
    return True


def configure_environment(cache_dir: Path) -> None:
    """vLLM's files in ``cache_dir`` (what the environment already says is kept), offline."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_dir / "vllm"))
    if "VLLM_RPC_BASE_PATH" not in os.environ:
        sockets = cache_dir / "rpc"
        sweep_sockets(sockets)
        (sockets / str(os.getpid())).mkdir(parents=True, exist_ok=True)
        os.environ["VLLM_RPC_BASE_PATH"] = str(sockets / str(os.getpid()))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

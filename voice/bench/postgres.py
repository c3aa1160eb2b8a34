"""A private PostgreSQL server for the tests and benchmarks: Debian's own server binaries, a data
folder of its own and a port on loopback, started and stopped by the caller.

Not a way to run production: deployments point ``--db`` at their own PostgreSQL
(``deploy/README.md``). Run as root (CI, these machines), the server runs as the
``postgres`` user that Debian's package creates, since PostgreSQL refuses root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from shell.reaper import adopt
from voice.bench.common import free_port

USER = "voice"  # the database superuser the tests connect as (trust authentication, loopback only)


def server_bin() -> Path | None:
    """The folder of Debian's newest PostgreSQL server binaries, or None when none is installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class PostgresServer:
    """``with PostgresServer() as pg: pg.create_database("t1")`` -> ``pg.url("t1")``."""

    def __init__(self, port: int | None = None) -> None:
        bindir = server_bin()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server is installed (Debian: apt-get install postgresql)")
        self.bin = bindir
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="voice-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            shutil.chown(self.root, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run(
            [*self._as, str(self.bin / tool), *args], capture_output=True, text=True, timeout=120, cwd=self.root
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"{tool} failed ({out.returncode}): {(out.stderr or out.stdout).strip()[-2000:]}")
        return out

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        # pg_ctl leaves the server in a session of its own, out of our process tree: handed to this
        # process's reaper, it ends with this process however it ends (shell/reaper.py).
        adopt(int((self.data / "postmaster.pid").read_text().split("\n", 1)[0]))

    def stop(self, mode: str = "fast") -> None:
        """``fast``: a clean shutdown; ``immediate``: as if the server died (clients see their connections cut)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def sql(self, statement: str, dbname: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=10) as conn:
            conn.execute(statement)

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

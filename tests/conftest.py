"""Shared fixtures: the bundled recordings and their transcripts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from voice.bench.common import Recording, recordings

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def pytest_configure(config: pytest.Config) -> None:
    # Every process the tests start (servers, engines, PostgreSQL) ends with this session, however
    # it ends, kill -9 included (shell/reaper.py).
    from shell.reaper import start_reaper

    start_reaper()


@pytest.fixture(scope="session")
def all_recordings() -> list[Recording]:
    return recordings()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's) on a private port and data folder, for the whole run."""
    from voice.bench.postgres import PostgresServer, server_bin

    if server_bin() is None:
        pytest.fail("no PostgreSQL server is installed: scripts/setup installs Debian's postgresql")
    server = PostgresServer()
    server.start()
    yield server
    server.close()


def raw(db: Path | str, sql: str, params: tuple = ()) -> list[tuple] | None:
    """One statement on a connection of its own (not the store's), committed; its rows if any."""
    from voice.app.databases import open_database

    conn = open_database(db).connect(readonly=False, timeout=5.0)
    try:
        cursor = conn.execute(sql, params)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else None
    finally:
        conn.close()

"""shell/heap.py: the allocator's settings for the server, from VOICE_HEAP (glibc; a no-op elsewhere)."""

from __future__ import annotations

import pytest

from shell import heap


@pytest.fixture(autouse=True)
def restore():
    yield
    heap._strategy = "none"


@pytest.mark.skipif(heap._libc is None, reason="not glibc")
@pytest.mark.parametrize(
    ("env", "expected"), [(None, heap.DEFAULT), ("none", "none"), ("trim", "trim"), ("x", heap.DEFAULT)]
)
async def test_the_strategy_comes_from_voice_heap(monkeypatch, env, expected):
    if env is None:
        monkeypatch.delenv("VOICE_HEAP", raising=False)
    else:
        monkeypatch.setenv("VOICE_HEAP", env)
    heap.tune()
    assert heap.strategy() == expected
    await heap.after_session()  # trims, or does nothing


async def test_off_glibc_nothing_is_done(monkeypatch):
    monkeypatch.setattr(heap, "_libc", None)
    monkeypatch.setenv("VOICE_HEAP", "mmap+trim")
    heap.tune()
    assert heap.strategy() == "none"
    await heap.after_session()

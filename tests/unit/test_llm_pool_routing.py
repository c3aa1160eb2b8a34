"""The pool's routing rules (pure), which errors fail over, and the engine wiring."""

from __future__ import annotations

import asyncio

import pytest

from llm.base import LLMError
from llm.openai_http import LLMStatusError, OpenAIChatClient
from llm.pool import LLMPool, Router, conversation_key, is_replica_failure
from shell.engines import EngineConfig, make_llm

URLS = ["http://a:8000", "http://b:8000", "http://c:8000"]


def test_idle_replicas_take_turns():
    r = Router(URLS)
    assert [r.pick() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_the_least_loaded_replica_is_picked():
    r = Router(URLS)
    r.acquire(0)
    r.acquire(0)
    r.acquire(1)
    assert r.pick() == 2
    r.acquire(2)
    assert r.pick() == 1  # 1 and 2 hold one each, 0 two: the tie nearest after the last pick
    r.release(0, failed=False)
    r.release(0, failed=False)
    assert r.pick() == 0


def test_concurrent_requests_spread_over_replicas():
    r = Router(URLS[:2])
    first = r.pick()
    r.acquire(first)
    second = r.pick()
    r.acquire(second)
    assert {first, second} == {0, 1}


def test_ties_are_broken_round_robin_not_by_index():
    r = Router(URLS)
    for _ in range(30):
        i = r.pick()
        r.acquire(i)
        r.release(i, failed=False)
    assert [s.served for s in r.replicas] == [10, 10, 10]


def test_unhealthy_replicas_are_skipped_until_healthy_again():
    r = Router(URLS)
    r.mark_failed(1)
    assert [r.pick() for _ in range(4)] == [0, 2, 0, 2]
    assert r.unhealthy() == [1]
    r.mark_healthy(1)
    assert sorted(r.pick() for _ in range(3)) == [0, 1, 2]


def test_an_unhealthy_replica_is_skipped_even_when_idle():
    r = Router(URLS[:2])
    r.acquire(0)
    r.acquire(0)
    r.mark_failed(1)
    assert r.pick() == 0


def test_a_failed_request_marks_its_replica_unhealthy():
    r = Router(URLS)
    r.acquire(0)
    r.release(0, failed=True)
    s = r.replicas[0]
    assert (s.healthy, s.in_flight, s.failures, s.served) == (False, 0, 1, 0)


def test_replicas_already_tried_for_a_reply_are_not_tried_again():
    r = Router(URLS)
    assert r.pick(tried=[0]) == 1
    assert r.pick(tried=[0, 1]) == 2
    assert r.pick(tried=[0, 1, 2]) is None


def test_when_every_replica_is_unhealthy_they_are_tried_anyway_then_none():
    r = Router(URLS)
    for i in range(3):
        r.mark_failed(i)
    tried: list[int] = []
    while (i := r.pick(tried)) is not None:
        tried.append(i)
    assert sorted(tried) == [0, 1, 2]


def test_healthy_replicas_come_before_unhealthy_untried_ones():
    r = Router(URLS)
    r.mark_failed(0)
    r.mark_failed(2)
    assert r.pick() == 1
    assert r.pick(tried=[1]) in (0, 2)  # the healthy one failed this reply: try the others anyway


def test_a_pool_needs_a_replica():
    with pytest.raises(ValueError):
        Router([])


def test_server_errors_fail_over_request_errors_do_not():
    assert is_replica_failure(LLMError("http://a/v1: ConnectError: refused"))
    assert is_replica_failure(LLMError("http://a/v1: the stream ended without [DONE]"))
    assert is_replica_failure(LLMStatusError("http://a/v1: HTTP 503", 503))
    assert is_replica_failure(LLMStatusError("http://a/v1: HTTP 429", 429))
    assert not is_replica_failure(LLMStatusError("http://a/v1: HTTP 400: bad request", 400))
    assert not is_replica_failure(LLMStatusError("http://a/v1: HTTP 404: no such model", 404))


def test_two_urls_make_a_pool_one_url_a_client():
    async def build_and_close(cfg: EngineConfig):
        llm = make_llm(cfg)
        await llm.close()
        return llm

    one = asyncio.run(build_and_close(EngineConfig(llm_url="http://a:8000")))
    assert isinstance(one, OpenAIChatClient)
    same = asyncio.run(build_and_close(EngineConfig(llm_url="http://a:8000", llm_urls=("http://a:8000/",))))
    assert isinstance(same, OpenAIChatClient)
    only_list = asyncio.run(build_and_close(EngineConfig(llm_urls=("http://a:8000",))))
    assert isinstance(only_list, OpenAIChatClient)
    pool = asyncio.run(
        build_and_close(EngineConfig(llm_url="http://a:8000", llm_urls=("http://b:8000", "http://a:8000")))
    )
    assert isinstance(pool, LLMPool)
    assert [s["url"] for s in pool.replicas_state()] == ["http://a:8000", "http://b:8000"]
    assert pool.replicas_state()[0] == {
        "url": "http://a:8000",
        "healthy": True,
        "in_flight": 0,
        "served": 0,
        "failures": 0,
    }


# -- affinity: a conversation stays on the replica that caches its prefix ---------------------


def conversation(first_question: str, turns: int) -> list[list[dict]]:
    """The requests of one conversation, turn by turn: each begins with all of the last."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": first_question}]
    requests = [list(messages)]
    for k in range(1, turns):
        messages += [{"role": "assistant", "content": f"answer {k}"}, {"role": "user", "content": f"question {k}"}]
        requests.append(list(messages))
    return requests


def test_every_request_of_a_conversation_has_one_key_and_conversations_have_their_own():
    keys = {conversation_key(r) for r in conversation("What is the weather?", 12)}
    assert len(keys) == 1
    assert conversation_key(conversation("What time is it?", 1)[0]) not in keys


def test_a_conversation_stays_on_one_replica_whatever_the_others_do():
    r = Router(URLS)
    key = conversation_key(conversation("What is the weather?", 1)[0])
    home = r.pick(key=key)
    for _ in range(20):
        other = r.pick()  # other traffic, round robin
        r.acquire(other)
        assert r.pick(key=key) == home
        r.release(other, failed=False)


def test_conversations_spread_over_the_replicas():
    r = Router(URLS)
    homes = [r.pick(key=conversation_key(conversation(f"question number {n}", 1)[0])) for n in range(300)]
    assert all(60 < homes.count(i) < 140 for i in range(3)), [homes.count(i) for i in range(3)]


def test_an_unhealthy_or_overloaded_home_is_passed_over_for_the_next_in_the_keys_order():
    r = Router(URLS, max_imbalance=2)
    key = "conversation"
    home, second, _ = r.order(key)
    assert r.pick(key=key) == home
    r.mark_failed(home)
    assert r.pick(key=key) == second  # the next in its own order, not the least loaded
    r.mark_healthy(home)
    assert r.pick(key=key) == home  # back home when it is back
    r.acquire(home)
    assert r.pick(key=key) == home  # one more than the others: still home
    r.acquire(home)
    assert r.pick(key=key) == second  # two more: spilled over
    assert r.pick(tried=[home, second], key=key) not in (home, second, None)


def test_only_the_keys_of_a_replica_that_goes_move():
    keys = [f"conversation {n}" for n in range(200)]
    three, two = Router(URLS), Router(URLS[:2])
    moved = [k for k in keys if three.pick(key=k) != 2 and three.pick(key=k) != two.pick(key=k)]
    assert moved == []  # a conversation not on the third replica stays where it was without it

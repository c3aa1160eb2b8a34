"""Fitting a conversation to the context at fixed marks, so the engine's prefix cache survives
(llm/context.py): pure, on counted messages."""

from __future__ import annotations

import itertools

from llm.context import approx_tokens, fit_to_context

SYSTEM = {"role": "system", "content": "You are a helpful voice assistant."}


def turn(k: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"question {k} " + "word " * (10 + k % 7)},
        {"role": "assistant", "content": f"answer {k} " + "word " * (40 + 3 * (k % 5))},
    ]


def conversation_prompts(turns: int, budget: int) -> list[list[dict[str, str]]]:
    """The prompt of each turn: the conversation so far and the new question, fitted."""
    history: list[dict[str, str]] = [SYSTEM]
    prompts = []
    for k in range(turns):
        question, answer = turn(k)
        prompt = fit_to_context([*history, question], approx_tokens, budget)
        prompts.append(prompt)
        history += [question, answer]
    return prompts


def test_the_prompt_starts_the_same_from_turn_to_turn_until_the_cut_moves():
    budget = 1000
    prompts = conversation_prompts(120, budget)
    assert all(approx_tokens(p) <= budget for p in prompts)
    moves = 0
    for before, after in itertools.pairwise(prompts):
        if after[: len(before)] != before:  # the last prompt is not a prefix of this one: the cache is lost
            moves += 1
            assert approx_tokens(after) >= budget // 2 - 100  # it dropped about a step, not all
    total = sum(approx_tokens(turn(k)) for k in range(120))
    # One move per half budget of conversation past the first full one; dropping one turn at a
    # time moves it at every turn after the first cut.
    assert 0 < moves <= total // (budget // 2)
    first_cut = next(i for i, p in enumerate(prompts) if p[1] != turn(0)[0])
    # Here turns of about 110 tokens against marks every 500: a move every four turns or more.
    assert moves <= (len(prompts) - first_cut) / 4


def test_what_fits_is_kept_whole():
    messages = [SYSTEM, *turn(0), *turn(1)[:1]]
    assert fit_to_context(messages, approx_tokens, 10_000) == messages


def test_the_system_prompt_and_the_newest_message_always_stay():
    huge = {"role": "user", "content": "word " * 5000}
    messages = [SYSTEM, *turn(0), *turn(1), huge]
    assert fit_to_context(messages, approx_tokens, 100) == [SYSTEM, huge]


def test_a_cut_never_leaves_a_tool_result_first():
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "f"}}]}
    result = {"role": "tool", "content": "r" * 300, "tool_call_id": "a"}
    messages = [SYSTEM]
    for k in range(12):
        messages += [turn(k)[0], call, result, turn(k)[1]]
    messages.append(turn(99)[0])
    for budget in (200, 400, 800, 1600):
        fitted = fit_to_context(messages, approx_tokens, budget)
        assert fitted[0] == SYSTEM and fitted[-1] == messages[-1]
        assert fitted[1]["role"] != "tool"
        assert approx_tokens(fitted) <= budget or len(fitted) == 2


def test_without_a_system_prompt_the_newest_message_stays():
    messages = [*turn(0), *turn(1), *turn(2)[:1]]
    fitted = fit_to_context(messages, approx_tokens, 80)
    assert fitted[-1] == messages[-1] and approx_tokens(fitted) <= 80

"""The quiet-line policy of a call (core/call.py), on scripted activity."""

from __future__ import annotations

from core.call import IdleAction, IdlePolicy, IdleWatch
from core.history import History, Turn


def run(watch: IdleWatch, until: float, busy=lambda t: False, speaking=lambda t: False) -> list[tuple[float, str]]:
    out, t = [], 0.0
    while t <= until + 1e-9:
        action = watch.check(round(t, 2), busy(t), speaking(t))
        if action is not None:
            out.append((round(t, 2), action.value))
        t += 0.02
    return out


def test_a_quiet_line_is_prompted_then_hung_up_on():
    watch = IdleWatch(IdlePolicy(after_s=8.0, prompts=1))
    assert run(watch, 30.0) == [(8.0, "prompt"), (16.02, "hang_up")]
    assert watch.hanging_up


def test_quiet_counts_from_the_end_of_what_was_going_on():
    watch = IdleWatch(IdlePolicy(after_s=2.0, prompts=2))
    # A reply plays until 3 s; the prompts take 1 s each to say.
    said: list[float] = []

    def busy(t: float) -> bool:
        return t < 3.0 or any(s <= t < s + 1.0 for s in said)

    out, t = [], 0.0
    while t <= 20.0:
        action = watch.check(round(t, 2), busy(t), False)
        if action is not None:
            out.append((round(t, 2), action))
            said.append(t)
        t += 0.02
    assert [a for _, a in out] == [IdleAction.PROMPT, IdleAction.PROMPT, IdleAction.HANG_UP]
    assert abs(out[0][0] - 5.0) < 0.05 and abs(out[1][0] - 8.0) < 0.05 and abs(out[2][0] - 11.0) < 0.05


def test_the_caller_speaking_starts_the_count_over_and_calls_off_a_goodbye():
    watch = IdleWatch(IdlePolicy(after_s=1.0, prompts=1))
    assert run(watch, 2.5) == [(1.0, "prompt"), (2.02, "hang_up")]
    assert watch.check(3.0, False, caller_speaking=True) is None
    assert not watch.hanging_up and watch.prompted == 0
    assert run(watch, 1.5) == [(1.0, "prompt")]


def test_nothing_happens_while_busy():
    watch = IdleWatch(IdlePolicy(after_s=1.0))
    assert run(watch, 60.0, busy=lambda t: True) == []


def test_a_calls_greeting_is_told_in_the_system_message_not_as_its_first_message():
    history = History()
    history.add(Turn("assistant", "Hello, thanks for calling."))
    history.add(Turn("user", "What time is it?"))
    history.add(Turn("assistant", "Noon."))
    assert history.messages("Be brief.") == [
        {"role": "system", "content": 'Be brief. You opened the conversation by saying "Hello, thanks for calling.".'},
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": "Noon."},
    ]
    greeted = History()
    greeted.add(Turn("assistant", "Hello."))
    greeted.add(Turn("assistant", "Are you still there?"))
    assert greeted.messages(None) == [
        {"role": "system", "content": 'You opened the conversation by saying "Hello." "Are you still there?".'}
    ]

"""Playback accounting at a speaker the pipeline does not drive sample by sample, and the network client as a device."""

from __future__ import annotations

import time

import numpy as np
import pytest

from core.audio import ASR_BLOCK, BLOCK_S
from shell.device import Played
from transport.client_device import ClientDevice
from transport.playback import PlaybackAccount, ReportError

RATE = 24000


def audio(n: int, value: float = 0.5) -> np.ndarray:
    return np.full(n, value, dtype=np.float32)


def test_reports_say_what_was_played_per_reply_in_order():
    account = PlaybackAccount(RATE, lead_s=0.1)
    account.sent_audio(audio(300), 1, 0.0)
    account.sent_audio(audio(200), 1, 0.0)
    account.sent_audio(audio(100), 2, 0.0)
    assert account.report(250) == [Played(1, 250)]
    assert account.report(550) == [Played(1, 250), Played(2, 50)]
    assert account.outstanding == 50
    assert account.report(550, dropped=50) == []  # dropped audio was never played
    assert (account.played, account.dropped, account.outstanding) == (550, 50, 0)


def test_reports_that_cannot_be_true_are_refused():
    account = PlaybackAccount(RATE, lead_s=0.1)
    account.sent_audio(audio(100), 1, 0.0)
    with pytest.raises(ReportError):
        account.report(101)
    account.report(60)
    with pytest.raises(ReportError):
        account.report(50)  # totals only grow
    with pytest.raises(ReportError):
        account.report(60, dropped=41)


def test_the_budget_keeps_the_speaker_lead_ahead():
    account = PlaybackAccount(RATE, lead_s=0.1)  # 2,400 samples
    assert account.budget(0.0) == 2400
    account.sent_audio(audio(2000), 1, 0.0)
    assert account.budget(0.0) == 400
    account.report(1500)
    assert account.budget(0.0) == 1900


def test_without_reports_audio_is_taken_as_played_as_it_arrives():
    account = PlaybackAccount(RATE, lead_s=0.1, acks=False)
    account.sent_audio(audio(2400), 1, now=1.0)  # 0.1 s of audio: played by 1.1
    assert account.budget(1.0) == 0
    assert account.estimate(1.05) == [Played(1, 1200)]
    assert account.budget(1.05) == 1200
    assert account.estimate(2.0) == [Played(1, 1200)]
    assert account.estimate(3.0) == []


def test_the_played_audio_itself_is_kept_when_asked():
    account = PlaybackAccount(RATE, lead_s=1.0, keep_audio=True)
    account.sent_audio(audio(100, 0.1), 1, 0.0)
    account.sent_audio(audio(100, 0.2), 2, 0.0)
    account.report(150, dropped=0)
    played = account.take_played_audio()
    assert len(played) == 150 and played[99] == pytest.approx(0.1) and played[100] == pytest.approx(0.2)
    account.report(150, dropped=50)
    assert len(account.take_played_audio()) == 0  # dropped audio is not a reference


def test_a_network_client_is_fed_at_real_time_however_its_audio_arrives():
    sent: list[tuple[int, int | None]] = []
    device = ClientDevice(RATE, lead_s=0.1, acks=True, send=lambda a, r: sent.append((len(a), r)))
    assert len(device.capture().mic) == 0  # nothing received yet
    device.receive(audio(ASR_BLOCK * 10, 0.01))  # a burst: 200 ms at once
    first = device.capture()
    assert len(first.mic) == ASR_BLOCK  # one block is due now, not ten
    time.sleep(2.5 * BLOCK_S)
    assert len(device.capture().mic) == 2 * ASR_BLOCK  # the blocks due since
    assert device.buffered_s == pytest.approx(7 * BLOCK_S)


def test_a_network_clients_reference_is_what_it_reported_played_and_silence_between():
    device = ClientDevice(RATE, lead_s=1.0, acks=True, send=lambda a, r: None)
    device.play(audio(4800, 0.3), 1)  # 200 ms at 24 kHz
    assert device.room() == RATE - 4800
    device.receive(audio(ASR_BLOCK * 2, 0.0))
    before = device.capture()
    assert not np.any(before.far)  # nothing reported played yet: silence
    device.report(4800, 0)
    assert device.played() == [Played(1, 4800)] and device.played() == []
    time.sleep(BLOCK_S * 1.5)
    after = device.capture()
    assert len(after.far) == len(after.mic) == ASR_BLOCK and np.any(after.far)  # the resampler's delay, then it

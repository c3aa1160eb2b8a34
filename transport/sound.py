"""The sound card: microphone in, speaker out, both at once (sounddevice).

Two PortAudio streams, one per direction, at one rate. (A single duplex
stream was the first version: through ALSA's PulseAudio plugin its capture
arrived 1.9 s late in most runs, measured here; one stream per direction
captures within 20 ms.) The two streams' timestamps are on PortAudio's one
clock, which is what lines them up. Their callbacks (PortAudio's threads)
only copy: each output block is taken from a small buffer of reply audio and
stamped with the time its first sample reaches the DAC
(``outputBufferDacTime``); each captured block is queued with what the
speaker played while it was captured, taken from the output's recent history
by the block's ``inputBufferAdcTime`` (the echo canceller's reference, kept
one continuous stream by :class:`transport.reference.ReferenceTrack`). The
pipeline side (:class:`SoundCard`, on the event loop every 10 ms) feeds the
captured audio to the session, tops up the output buffer a little ahead of
the speaker (``lead``), and counts as played only what the DAC has reached by
now, so a barge-in truncates the history to what came out of the speaker,
not what was written to the device. The accounting of what was sent and
played is the same as for a network client
(:class:`transport.playback.PlaybackAccount`, kept by :class:`transport.local.SoundCardDevice`).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections import deque
from dataclasses import dataclass
from time import monotonic

import numpy as np

from core.audio import ASR_RATE
from transport.reference import ReferenceTrack
from transport.resample import Resampler


class AudioDeviceError(RuntimeError):
    """A device problem a person can fix, said in one line."""


@dataclass(frozen=True)
class DeviceChoice:
    input: int | str | None = None  # None: the system default
    output: int | str | None = None
    rate: int | None = None  # None: the devices' default rate


def list_devices() -> str:
    import sounddevice as sd

    try:
        return str(sd.query_devices())
    except sd.PortAudioError as e:
        raise AudioDeviceError(f"cannot list audio devices: {e}") from e


def _describe(e: Exception, role: str) -> str:
    """A PortAudio error as one line that says what to do (``role``: "input" or "output")."""
    noun = "microphone" if role == "input" else "speaker"
    text = str(e)
    low = text.lower()
    if "busy" in low or "unavailable" in low or "-9985" in low:
        return f"the {noun} is busy (another program holds it): close that program or pick another with --{role}-device"
    if "sample rate" in low or "-9997" in low:
        return f"the {noun} does not take that sample rate: leave --device-rate out to use its own"
    if "matching" in low:
        return f"no {noun} matches that name: pick one from --list-devices with --{role}-device"
    if "device -1" in low or "no default" in low or "invalid device" in low or "-9996" in low:
        return f"no {noun} found: plug one in, or pick one with --{role}-device (see --list-devices)"
    return f"cannot open the {noun}: {text} (see --list-devices)"


class SoundCard:
    """The two streams and the buffers between them and the session.

    ``block_s`` is the device block (small: latency), ``lead_s`` how much
    reply audio may wait in the output buffer ahead of the DAC.
    """

    def __init__(
        self,
        devices: DeviceChoice,
        output_rate: int,
        block_s: float = 0.01,
        lead_s: float = 0.06,
        latency_s: float = 0.05,
    ) -> None:
        import sounddevice as sd

        self._sd = sd
        try:
            in_info = sd.query_devices(devices.input, "input")
        except (sd.PortAudioError, ValueError) as e:
            raise AudioDeviceError(_describe(e, "input")) from e
        try:
            out_info = sd.query_devices(devices.output, "output")
        except (sd.PortAudioError, ValueError) as e:
            raise AudioDeviceError(_describe(e, "output")) from e
        self.input_name, self.output_name = in_info["name"], out_info["name"]
        self.rate = int(devices.rate or in_info["default_samplerate"])
        self.output_rate = output_rate
        self.block = max(1, round(block_s * self.rate))
        self.lead = round(lead_s * self.rate)
        # This transport's edge: the microphone and the speaker's signal to 16 kHz, the reply to the device.
        self._to_16k = Resampler(self.rate, ASR_RATE)
        self._to_device = Resampler(output_rate, self.rate)
        self._far_16k = Resampler(self.rate, ASR_RATE)
        self._lock = threading.Lock()  # between the two callbacks and the event loop
        self._captured: deque[tuple[np.ndarray, np.ndarray]] = deque()  # (mic, far) per input block
        self._out = np.zeros(0, dtype=np.float32)  # reply audio at the device rate, not yet given to the device
        self._frozen = False  # paused: the speaker plays silence, the buffer waits
        self._schedule: deque[tuple[float, int]] = deque()  # (DAC time, reply samples) per output block
        self._in_resampler = False  # play() gave it audio it may still hold back
        self._played_device = 0  # reply samples that reached the DAC by now
        self.dropped_device = 0  # flushed unplayed (device samples)
        self.xruns = 0
        self._history = np.zeros(0, dtype=np.float32)  # what went to the speaker lately (device rate)
        self._history_len = self.rate  # 1 s
        self._history_end = 0.0  # DAC time just after its last sample
        self._history_total = 0  # samples that ever went into the history: the count its end is at
        self._reference = ReferenceTrack(self.rate)
        self.latency = (0.0, 0.0)  # (input, output) seconds, as the devices report them
        self.failed: str | None = None
        self.restarts = 0
        self.wedged = False  # a call into a stream never returned: leave them alone from now on
        self._last_input = self._last_output = monotonic()  # each stream's last callback
        self._stream_clock = (0.0, monotonic())  # (stream time, monotonic) at the last output callback
        self._devices = devices
        self._latency_s = latency_s
        self._closed = False
        self._streams = self._open()

    def _open(self) -> tuple:
        sd = self._sd
        common = dict(
            samplerate=self.rate,
            blocksize=self.block,
            channels=1,
            dtype="float32",
            # A few blocks of device buffer: on a loaded machine "low" underruns, and an
            # underrun can stop an ALSA stream. The DAC timestamps account for it.
            latency=self._latency_s,
            finished_callback=self._finished,
        )
        try:
            mic = sd.InputStream(device=self._devices.input, callback=self._input_callback, **common)
        except (sd.PortAudioError, ValueError) as e:
            raise AudioDeviceError(_describe(e, "input")) from e
        try:
            speaker = sd.OutputStream(device=self._devices.output, callback=self._output_callback, **common)
        except (sd.PortAudioError, ValueError) as e:
            with contextlib.suppress(Exception):
                mic.close()
            raise AudioDeviceError(_describe(e, "output")) from e
        self.latency = (mic.latency, speaker.latency)
        return mic, speaker

    def restart(self) -> None:
        """Open the devices again after a stream stopped on its own (an ALSA xrun can do that).

        Blocks for at most a few seconds (call it off the event loop); raises
        :class:`AudioDeviceError` if the old streams cannot be let go or new ones opened.
        """
        self.restarts += 1
        self._release()
        if self.wedged:
            raise AudioDeviceError("the old stream would not close")
        # Handed to the old stream before it stopped: taken as played. The reply audio not
        # handed over yet is ours, not the stream's: the new stream plays it, so the reply
        # still ends (flushed, it would count as dropped, and the session wait for it forever).
        with self._lock:
            self._played_device += sum(n for _, n in self._schedule)
            self._schedule.clear()
        self.failed = None
        error: list[Exception] = []

        def reopen() -> None:
            try:
                self._streams = self._open()
                self.start()
            except Exception as e:  # said below, in one line
                error.append(e)

        if not self._bounded(reopen, 3.0):
            raise AudioDeviceError("opening it again did not return")
        if error:
            raise error[0] if isinstance(error[0], AudioDeviceError) else AudioDeviceError(str(error[0]))

    def _bounded(self, call, timeout: float) -> bool:
        """Run ``call`` in a thread of its own; False if it has not returned after ``timeout`` seconds.

        A device that vanished can leave a PortAudio stream waiting forever on a lock
        inside the sound server's client library (seen with ALSA's PulseAudio plugin
        when the server dies): such a call must not take the event loop, or the exit, with it.
        """
        thread = threading.Thread(target=call, name="sound-card", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            self._wedge()
            return False
        return True

    def _wedge(self) -> None:
        self.wedged = True
        # sounddevice's exit handler terminates PortAudio, which closes the streams: it would wait forever too.
        atexit.unregister(self._sd._exit_handler)
        # The stuck threads keep this object alive to the end: let its resamplers go now, or
        # their bindings print "leaked instances" at exit under the one-line message.
        self._to_16k = self._to_device = self._far_16k = None  # type: ignore[assignment]

    def _release(self) -> None:
        """Abort and close the streams, giving up on them if that does not return within 2 s."""
        if self.wedged:
            return

        def release() -> None:
            # abort, not stop: stop() waits for buffers that may never drain (a device gone);
            # and a stream whose device is gone may fail to close: there is nothing left to do.
            for stream in self._streams:
                with contextlib.suppress(Exception):
                    stream.abort()
                with contextlib.suppress(Exception):
                    stream.close()

        self._bounded(release, 2.0)

    # -- PortAudio's threads -----------------------------------------------------

    def _output_callback(self, outdata, frames, time, status) -> None:
        self._last_output = monotonic()
        self._stream_clock = (time.currentTime, self._last_output)
        if status.output_underflow:
            self.xruns += 1
        dac = time.outputBufferDacTime or time.currentTime + self.latency[1]  # a host API without timestamps
        with self._lock:
            n = 0 if self._frozen else min(frames, len(self._out))
            outdata[:n, 0] = self._out[:n]
            outdata[n:, 0] = 0.0
            self._out = self._out[n:]
            if n:
                self._schedule.append((dac, n))
            self._history = np.concatenate([self._history, outdata[:, 0]])[-self._history_len :]
            self._history_end = dac + frames / self.rate
            self._history_total += frames

    def _input_callback(self, indata, frames, time, status) -> None:
        self._last_input = monotonic()
        if status.input_overflow:
            self.xruns += 1
        adc = time.inputBufferAdcTime or time.currentTime - self.latency[0]
        # The echo canceller's reference: what the speaker played while this block was
        # captured, found in the output's history by the two streams' timestamps.
        far = np.zeros(frames, dtype=np.float32)
        with self._lock:
            history, oldest = self._history, self._history_total - len(self._history)
            measured = self._history_total - round((self._history_end - adc) * self.rate)
            snap = self._reference.snap
            around = history[max(measured - snap - oldest, 0) : max(measured + frames + snap - oldest, 0)]
            start = self._reference.place(measured, frames, silent=not np.any(around)) - oldest
            lo, hi = max(start, 0), min(start + frames, len(history))
            if hi > lo:
                far[lo - start : hi - start] = history[lo:hi]
        self._captured.append((indata[:, 0].copy(), far))

    def _finished(self) -> None:
        if not self._closed and self.failed is None:
            self.failed = "the audio device stopped"

    # -- the pipeline's side (event loop) ---------------------------------------

    def stalled(self, seconds: float) -> bool:
        """A stream without a callback for ``seconds``: it stopped without saying so (its server went away)."""
        return monotonic() - min(self._last_input, self._last_output) > seconds

    def start(self) -> None:
        self._last_input = self._last_output = monotonic()
        for stream, role in zip(self._streams, ("input", "output"), strict=True):
            try:
                stream.start()
            except self._sd.PortAudioError as e:
                raise AudioDeviceError(_describe(e, role)) from e

    def close(self) -> None:
        """Stop and close the streams (bounded: a stream that hangs is given up on)."""
        self._closed = True
        self._release()

    def captured(self) -> tuple[np.ndarray, np.ndarray]:
        """Microphone audio since the last call, and what the speaker played over the same span (16 kHz)."""
        mic, far = [], []
        while self._captured:
            m, f = self._captured.popleft()
            mic.append(m)
            far.append(f)
        if not mic:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)
        return self._to_16k(np.concatenate(mic)), self._far_16k(np.concatenate(far))

    def room(self) -> int:
        """Reply samples (at the output rate) the buffer takes now without running more than ``lead`` ahead."""
        with self._lock:
            free = self.lead - len(self._out)
        return max(0, round(free * self.output_rate / self.rate))

    def play(self, audio: np.ndarray) -> None:
        """Queue reply audio (at the output rate) for the speaker."""
        audio = self._to_device(audio)
        self._in_resampler = True
        with self._lock:
            self._out = np.concatenate([self._out, audio])

    def drain(self) -> None:
        """No more reply audio for now: let out the last samples the resampler holds back."""
        if not self._in_resampler:
            return
        tail = self._to_device.flush()
        self._in_resampler = False
        with self._lock:
            self._out = np.concatenate([self._out, tail])

    @property
    def idle(self) -> bool:
        """Everything given to :meth:`play` has reached the DAC (or was flushed)."""
        with self._lock:
            return not self._in_resampler and not len(self._out) and not self._schedule

    def freeze(self, frozen: bool) -> None:
        with self._lock:
            self._frozen = frozen

    def flush(self) -> None:
        if self.wedged:  # the device is gone, and its resamplers with it (see _wedge)
            return
        self._to_device.reset()
        self._in_resampler = False
        with self._lock:
            self.dropped_device += len(self._out)
            self._out = self._out[:0]

    def played(self) -> tuple[int, int]:
        """Reply samples (output rate) that reached the DAC by now, and those flushed, as totals."""
        # The stream's clock, extrapolated from the last callback: asking PortAudio
        # (Pa_GetStreamTime) from here can block forever once the device is gone.
        stream_time, at = self._stream_clock
        now = stream_time + (monotonic() - at)
        with self._lock:
            while self._schedule and self._schedule[0][0] <= now:
                self._played_device += self._schedule.popleft()[1]
            played, dropped = self._played_device, self.dropped_device
        ratio = self.output_rate / self.rate
        return round(played * ratio), round(dropped * ratio)

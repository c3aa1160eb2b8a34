"""Virtual audio devices for the desk tests and python -m voice.bench local.

:func:`start_pulse` starts a private PulseAudio server: a null sink `spk` is the
speaker (record it from `spk.monitor`), a remap source `virtmic` the microphone
(feed it by playing into the null sink `micfeed`). :func:`loop_back` sends the
speaker's sound back into the microphone, quieter and later, as a room does.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path


class PulseError(RuntimeError):
    pass


def start_pulse(d: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """A PulseAudio server with its socket in ``d``; returns it and the environment that reaches it."""
    env = {**os.environ, "PULSE_SERVER": f"unix:{d}/native", "HOME": str(d), "XDG_RUNTIME_DIR": str(d)}
    cmd = [
        "pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--log-target=stderr",
        "-L", f"module-native-protocol-unix auth-anonymous=1 socket={d}/native",
        "-L", "module-null-sink sink_name=spk rate=48000 channels=2",
        "-L", "module-null-sink sink_name=micfeed rate=48000 channels=1",
        "-L", "module-remap-source source_name=virtmic master=micfeed.monitor",
    ]  # fmt: skip
    with open(d / "pulse.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        if subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        raise PulseError(f"PulseAudio did not start: {(d / 'pulse.log').read_text()[-2000:]}")
    for args in (["set-default-source", "virtmic"], ["set-default-sink", "spk"]):
        subprocess.run(["pactl", *args], env=env, check=True)
    return proc, env


def loop_back(env: dict[str, str], db: float, latency_ms: int = 40) -> str:
    """The speaker's sound into the microphone, ``db`` quieter, ``latency_ms`` later; returns the module id.

    Unload it with ``pactl unload-module``.
    """
    module = subprocess.run(
        ["pactl", "load-module", "module-loopback", "source=spk.monitor", "sink=micfeed", f"latency_msec={latency_ms}"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (index,) = [i["index"] for i in _sink_inputs(env) if str(i.get("owner_module")) == module]
    subprocess.run(["pactl", "set-sink-input-volume", str(index), f"{db}dB"], env=env, check=True)
    (volume,) = [i["volume"] for i in _sink_inputs(env) if i["index"] == index]
    got = [float(ch["db"].split()[0]) for ch in volume.values()]
    if any(abs(g - db) > 0.5 for g in got):
        raise PulseError(f"the loopback's volume is {got} dB, not {db}")
    return module


def _sink_inputs(env: dict[str, str]) -> list[dict]:
    out = subprocess.run(["pactl", "-f", "json", "list", "sink-inputs"], env=env, capture_output=True, text=True)
    return json.loads(out.stdout)

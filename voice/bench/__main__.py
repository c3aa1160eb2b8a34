"""The benchmarks, one entry point: ``python -m voice.bench NAME [options]``.

``python -m voice.bench --help`` lists them with what each measures; ``python -m voice.bench NAME --help``
gives a benchmark's options. Each is a module of voice/bench (a package's is its ``run`` module) with
``main(argv)``; its ``ENV``, if any, is set (unless already set) before the module is imported, since the
engines read it as they load.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from shell.reaper import start_reaper

# name: (module, what it measures). The order is the listing's: latency first, then turn-taking, then the rest.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "pipeline": ("voice.bench.pipeline", "voice-to-voice latency by stage against a sequential baseline, real time"),
    "hearing": ("voice.bench.hearing", "interruptions with clients at once on every transport: paused, cut, real time"),
    "trace": ("voice.bench.trace", "where a turn's time goes: every engine call at the pause, beside its time alone"),
    "turn_taking": ("voice.bench.turn_taking", "turn-taking over the issue-15 fixtures, now against before (virtual)"),
    "endpoint": ("voice.bench.endpoint", "when the person's turn ends: Smart Turn against silence alone (virtual)"),
    "reading": ("voice.bench.reading", "how each bundled LLM reads the words of a pause: P(the sentence ends here)"),
    "smart_turn": ("voice.bench.smart_turn", "Smart Turn on this CPU: the cost of a call, its answer as a pause grows"),
    "speculation": ("voice.bench.speculation", "speculative replies: ready at the endpoint, and the tokens wasted"),
    "bargein": ("voice.bench.bargein", "barge-in over the labelled fixtures: reaction, truncation, false barge-ins"),
    "goodbyes": ("voice.bench.goodbyes", "goodbyes in two breaths kept one turn, and said over the reply (virtual)"),
    "interruptions": ("voice.bench.interruptions", "interruptions heard whole: the WER of words said over a reply"),
    "long_conversation": (
        "voice.bench.long_conversation",
        "the first token over a 50-turn conversation: the prefix cache, and trimming to the context",
    ),
    "compile": (
        "voice.bench.compile",
        "the embedded LLM compiled or eager: each start's time, first token and decode, per model",
    ),
    "asr": ("voice.bench.asr", "Whisper's final pass: the full 30 s window against the short window"),
    "languages": (
        "voice.bench.languages",
        "other languages: language ID, error rates, replies in the person's language, voice-to-voice",
    ),
    "language_turns": (
        "voice.bench.language_turns",
        "turn-taking in other languages: a pause inside a real sentence, with the language's word lists and without",
    ),
    "scenarios": (
        "voice.bench.scenarios",
        "test scenarios on virtual time: wall time against the conversation's length, and runs identical",
    ),
    "noise": (
        "voice.bench.noise",
        "real noise and a TV in the room at 20 to 0 dB, with and without RNNoise: WER, endpoints, barge-ins (virtual)",
    ),
    "noise_oracle": (
        "voice.bench.noise_oracle",
        "the noise bench's sentences cut exactly under its rooms: what Whisper alone hears, the pipeline's ceiling",
    ),
    "telephony": ("voice.bench.telephony", "what the phone costs the words: Whisper on 8 kHz G.711 audio"),
    "answers": (
        "voice.bench.answers",
        "what it says: facts by rubric, tool decisions, sense by a judge, form for the ear, per model (virtual)",
    ),
    "flows": (
        "voice.bench.flows",
        "agents as flows: the restaurant's booking line on spoken variants, and what a transition costs (virtual)",
    ),
    "tools": ("voice.bench.tools", "tool calls from spoken requests: the right tool, with the right arguments"),
    "tool_turns": ("voice.bench.tool_turns", "tool calls in the voice loop, real time: which run, how long one waits"),
    "server": ("voice.bench.server", "the WebSocket server measured from its clients, real time"),
    "transports": (
        "voice.bench.transports",
        "voice-to-voice over each transport (phone, WebRTC, Realtime) against /ws",
    ),
    "local": ("voice.bench.local", "`python -m voice.run` at a desk, on PulseAudio virtual devices"),
    "failover": ("voice.bench.failover", "LLM pool failover: how long a reply stalls when its vLLM server dies"),
    "scale": ("voice.bench.scale", "beyond one machine: workers behind the front door, affinity, resume"),
    "store": ("voice.bench.store", "the conversation store off the event loop: finalization to commit"),
    "session_memory": ("voice.bench.session_memory", "the server's memory over many sessions, per heap strategy"),
    "tts_memory": ("voice.bench.tts_memory", "what piper keeps of the memory its longest sentence needed"),
    "fuzz": ("voice.bench.fuzz.run", "the server under attack: malformed messages, abusive clients, crafted HTTP"),
    "orphans": ("voice.bench.orphans", "what a killed program leaves running, per way of ending and per guard"),
}


def usage() -> str:
    width = max(map(len, BENCHMARKS))
    rows = "\n".join(f"  {name:<{width}}  {what}" for name, (_, what) in BENCHMARKS.items())
    return (
        "usage: python -m voice.bench NAME [options]\n\n"
        f"benchmarks:\n{rows}\n\n"
        "python -m voice.bench NAME --help gives a benchmark's options."
    )


def main(argv: list[str]) -> int:
    """Run benchmark ``argv[0]`` with the options after it; 2 and the list if it names none."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, *options = argv
    if name not in BENCHMARKS:
        print(f"python -m voice.bench: no benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name = BENCHMARKS[name][0]
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None, module_name
    # Before anything starts: the benchmark's processes (engines, servers) end with it, however it ends.
    start_reaper()
    # ENV is read before the import: the module's own imports may load what reads it.
    for key, value in _env_of(spec.origin).items():
        os.environ.setdefault(key, value)
    code = importlib.import_module(module_name).main(options)
    return code if isinstance(code, int) else 0  # a benchmark that cannot run as asked says so in its exit code


def _env_of(path: str) -> dict[str, str]:
    """The module's top-level ``ENV = {...}`` literal, read without importing it."""
    import ast

    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["ENV"]:
            return ast.literal_eval(node.value)
    return {}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

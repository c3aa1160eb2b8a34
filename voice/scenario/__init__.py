"""Conversation scenarios: an agent tested like code, on virtual time, with the real audio path.

A scenario file (YAML) names the agent (``python -m voice.run``'s options), the person's turns (a
recording, or text said by a voice that is not the assistant's) and what each turn expects. The
runner feeds the turns through one session on virtual time, so the same file gives the same events,
transcripts and recordings on every machine and every run, and checks the expectations.

- :mod:`voice.scenario.spec`: the file, read and checked (:class:`~voice.scenario.spec.Scenario`);
- :mod:`voice.scenario.person`: each turn's audio (said, paused at a word, mixed with a sound);
- :mod:`voice.scenario.feed`: when each turn starts (at a time, or after the reply starts or ends);
- :mod:`voice.scenario.expect`: the expectations, checked on what happened (pure);
- :mod:`voice.scenario.runner`: one scenario through a session on the engines;
- :mod:`voice.scenario.report`: the terminal table, JSON and JUnit XML; :mod:`voice.scenario.html`
  the page with both sides' waveforms and the events on one timeline;
- :mod:`voice.scenario.pytest_plugin`: scenario files as pytest tests;
- ``python -m voice.scenario run FILE.yaml...`` (:mod:`voice.scenario.__main__`).
"""

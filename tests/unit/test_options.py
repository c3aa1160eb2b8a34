"""``python -m voice.run``'s option table (voice/app/options.py): each option declared once, its default the
configuration's own, and the configurations the runtime makes of them."""

from __future__ import annotations

import dataclasses

import pytest

from core.barge_in import BargeInPolicy
from core.call import CallConfig
from core.end_of_turn import EndOfTurnConfig
from core.endpointing import EndpointConfig
from llm.base import GenerationConfig
from shell.config import SessionConfig
from shell.engines import EngineConfig
from voice.app.options import OPTIONS, build_parser, configure
from voice.app.runtime import call_config, end_of_turn_config, engine_config, session_config

parse = build_parser().parse_args


def test_each_option_is_declared_once_and_goes_to_a_real_field():
    flags = [o.flag for o in OPTIONS]
    assert len(flags) == len(set(flags))
    dests = [o.dest for o in OPTIONS]
    assert len(dests) == len(set(dests))
    defaults = vars(parse([]))
    assert set(dests) == set(defaults)  # every option's value is where its declaration says
    for option in OPTIONS:
        if option.into is not None:
            names = {f.name for f in dataclasses.fields(option.into.config)}
            assert option.into.name in names, option.flag


def test_with_no_options_every_configuration_is_its_own_default():
    args = parse([])
    assert configure(args, EndpointConfig) == EndpointConfig()
    assert configure(args, BargeInPolicy) == BargeInPolicy()
    assert configure(args, GenerationConfig) == GenerationConfig()
    assert end_of_turn_config(args) == EndOfTurnConfig()
    assert session_config(args, end_of_turn_config(args)) == SessionConfig()
    assert engine_config(args, EngineConfig.llm_model, smart_turn=True) == EngineConfig()


def test_milliseconds_on_the_command_line_are_seconds_in_the_configuration():
    endpoint_ms = ["--min-speech-ms", "300", "--hangover-ms", "700", "--preroll-ms", "200", "--pause-ms", "64"]
    args = parse([*endpoint_ms, "--barge-in-commit-ms", "900", "--early-final-ms", "200"])
    endpoint = configure(args, EndpointConfig)
    assert (endpoint.min_speech_s, endpoint.hangover_s, endpoint.preroll_s, endpoint.onset_s) == (0.3, 0.7, 0.2, 0.064)
    cfg = session_config(args, None)
    assert cfg.barge_in.commit_s == 0.9 and cfg.early_final_s == 0.2 and cfg.end_of_turn is None
    assert session_config(parse(["--no-early-final"]), None).early_final_s is None
    assert parse([]).turn_recheck_ms == 0  # a field whose default is None shows 0 ms
    assert end_of_turn_config(parse(["--turn-recheck-ms", "150"])).recheck_s == 0.15
    assert end_of_turn_config(parse(["--turn-recheck-ms", "0"])).recheck_s is None


def test_switches_and_values_that_mean_none():
    args = parse(["--no-aec", "--no-speculate", "--partial-model", "none", "--llm-dtype", "auto", "--asr-full-window"])
    cfg = session_config(args, None)
    assert not cfg.echo_cancel and not cfg.speculate
    engines = engine_config(args, "smollm2-135m", smart_turn=False)
    assert (engines.partial_model, engines.llm_dtype, engines.asr_window_pad_s, engines.smart_turn) == (
        None,
        None,
        None,
        False,
    )
    urls = engine_config(parse(["--llm-url", "http://a", "--llm-url", "http://b", "--no-llm-affinity"]), "m", True)
    assert (urls.llm_url, urls.llm_urls, urls.llm_affinity) == ("http://a", ("http://b",), False)
    assert session_config(parse(["--system-prompt", "be brief"]), None).system_prompt == "be brief"


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        ([], CallConfig()),
        (["--call-idle-s", "0", "--call-greeting", "  "], CallConfig(greeting=None, idle=None)),
    ],
)
def test_the_call_options_make_the_call_config(argv, want):
    assert call_config(parse(argv)) == want


def test_the_token_defaults_to_voice_token_when_the_parser_is_built(monkeypatch):
    monkeypatch.setenv("VOICE_TOKEN", "s3cret")
    assert build_parser().parse_args([]).token == "s3cret"
    monkeypatch.delenv("VOICE_TOKEN")
    assert build_parser().parse_args([]).token is None

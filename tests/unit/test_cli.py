"""The command line's turn-taking flags become the configuration they name (no engines)."""

from __future__ import annotations

from voice.app.cli import build_parser, end_of_turn_config, main
from voice.core.end_of_turn import EndOfTurnConfig


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_the_defaults_are_the_configs():
    assert end_of_turn_config(parse()) == EndOfTurnConfig()


def test_the_words_can_be_left_unread():
    assert end_of_turn_config(parse("--turn-min-sentence-end", "0")).min_sentence_end is None
    assert end_of_turn_config(parse("--turn-min-sentence-end", "0.01")).min_sentence_end == 0.01


def test_silence_alone_has_no_end_of_turn_config():
    assert end_of_turn_config(parse("--turn-detector", "silence")) is None


def test_a_nonpositive_early_final_is_refused(capsys):
    assert main(["--early-final-ms", "0"]) != 0
    assert "--early-final-ms" in capsys.readouterr().err

"""The answers benchmark's conversations (``python -m voice.bench answers``): follow-ups, corrections, other
languages and real people's recordings (the single questions are in :mod:`voice.bench.answer_requests`)."""

from __future__ import annotations

from voice.bench.answer_rubric import (
    _ORDER_1007,
    BUILTIN,
    NO_TOOL,
    SHOP,
    Request,
    ToolWanted,
    Turn,
    _minutes,
    _n,
    _one,
    _order,
    _said,
)
from voice.bench.tool_requests import _equals, _timer

FOLLOW_UPS = (
    Request(
        "times_then_add",
        "follow_up",
        (
            Turn("What's seven times eight?", _said(_n("56", "fifty[- ]six")), ToolWanted("calculate", _equals(56))),
            Turn("And add four to that.", _said(_n("60", "sixty")), ToolWanted("calculate", _equals(60))),
        ),
        needs=BUILTIN,
    ),
    Request(
        "capital_then_korea",
        "follow_up",
        (
            Turn("What's the capital of Japan?", _said(r"tokyo"), NO_TOOL),
            Turn("And of South Korea?", _said(r"seoul"), NO_TOOL),
        ),
    ),
    Request(
        "timer_make_it_ten",
        "follow_up",
        (
            Turn(
                "Set a timer for five minutes, please.",
                _said(_minutes("5", "five")),
                ToolWanted("set_timer", _timer(300)),
            ),
            Turn("Actually, make it ten.", _said(_minutes("10", "ten")), ToolWanted("set_timer", _timer(600))),
        ),
        needs=BUILTIN,
    ),
    Request(
        "largest_then_smallest_planet",
        "follow_up",
        (
            Turn("What's the biggest planet in our solar system?", _said(r"jupiter"), NO_TOOL),
            Turn("And the smallest one?", _said(r"mercury"), NO_TOOL),
        ),
    ),
    Request(
        "boiling_then_fahrenheit",
        "follow_up",
        (
            Turn("What's the boiling point of water in Celsius?", _said(_n("100", "(?:one|a) hundred")), NO_TOOL),
            Turn("And in Fahrenheit?", _said(_n("212", "two hundred (?:and )?twelve")), None),
        ),
        note="The second turn may or may not use the calculator: not scored for tools.",
    ),
    Request(
        "order_then_when",
        "follow_up",
        (
            Turn(
                "Can you look up order one zero zero seven for me?",
                _ORDER_1007,
                ToolWanted("get_order_status", _order("1007")),
            ),
            Turn("So when will it ship?", _said(r"\btoday\b", none_of=(r"tomorrow",)), None),
        ),
        needs=SHOP,
        note="'It' is order 1007; looking it up again is fine.",
    ),
)

CORRECTIONS = (
    _one(
        "nine_times_corrected",
        "correction",
        "What is nine times six? No, sorry, nine times seven.",
        _said(_n("63", "sixty[- ]three"), none_of=(_n("54", "fifty[- ]four"),)),
        ToolWanted("calculate", _equals(63)),
        needs=BUILTIN,
    ),
    _one(
        "timer_three_no_four",
        "correction",
        "Set a timer for three... no, four minutes.",
        _said(_minutes("4", "four"), none_of=(_minutes("3", "three"),)),
        ToolWanted("set_timer", _timer(240)),
        needs=BUILTIN,
    ),
    Request(
        "meant_times_four",
        "correction",
        (
            Turn("What's twenty times three?", _said(_n("60", "sixty")), ToolWanted("calculate", _equals(60))),
            Turn(
                "Oh, sorry, I meant twenty times four.",
                _said(_n("80", "eighty"), none_of=(_n("60", "sixty"),)),
                ToolWanted("calculate", _equals(80)),
            ),
        ),
        needs=BUILTIN,
    ),
    _one(
        "order_number_corrected",
        "correction",
        "Can you check order 4512? Oh wait, no, it's 1007.",
        _ORDER_1007,
        ToolWanted("get_order_status", _order("1007")),
        needs=SHOP,
        note="Only 1007 is wanted: looking up 4512 as well is a wrong call.",
    ),
)

LANGUAGE = (
    _one(
        "capital_france_es",
        "language",
        "¿Cuál es la capital de Francia?",
        _said(r"par[ií]s"),
        NO_TOOL,
        language="es",
    ),
    _one(
        "days_in_week_fr",
        "language",
        "Combien de jours y a-t-il dans une semaine ?",
        _said(_n("7", "sept")),
        NO_TOOL,
        language="fr",
        note="Kokoro (the only offline voice for French) was unreliable in French: a failure may be the ASR's.",
    ),
    _one(
        "spider_legs_de",
        "language",
        "Wie viele Beine hat eine Spinne?",
        _said(_n("8", "acht")),
        NO_TOOL,
        language="de",
    ),
    _one(
        "six_times_seven_it",
        "language",
        "Quanto fa sei per sette?",
        _said(_n("42", "quarantadue")),
        ToolWanted("calculate", _equals(42)),
        language="it",
        needs=BUILTIN,
    ),
    _one(
        "largest_ocean_pt",
        "language",
        "Qual é o maior oceano do mundo?",
        _said(r"pac[ií]fico"),
        NO_TOOL,
        language="pt",
    ),
    _one(
        "capital_japan_ja",
        "language",
        "日本の首都はどこですか?",
        _said(r"東京|とうきょう|トウキョウ|tokyo"),
        NO_TOOL,
        language="ja",
    ),
)

REAL_VOICE = (
    _one(
        "jfk_ask_not",
        "real_voice",
        "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
        None,
        NO_TOOL,
        recording="tests/fixtures/jfk_inaugural_1961.wav",
        note="A famous quotation, no question: a good reply recognises it (Kennedy, 1961) or takes up its sense.",
    ),
    _one(
        "glad_to_see_you",
        "real_voice",
        "Lord, but I'm glad to see you again, Phil.",
        None,
        NO_TOOL,
        recording="tests/fixtures/cmu_arctic_us_axb_a0004.wav",
        note="A greeting to someone else by name: the reply should take it kindly, not pretend to be Phil.",
    ),
    _one(
        "ever_forget_it",
        "real_voice",
        "Will we ever forget it.",
        None,
        NO_TOOL,
        recording="tests/fixtures/cmu_arctic_us_axb_a0005.wav",
        note='A question with no context; Whisper base hears "Will be over for greater" (tests/fixtures/README.md).',
    ),
    _one(
        "invention_of_printing",
        "real_voice",
        "the invention of movable metal letters in the middle of the fifteenth century may justly be considered as"
        " the invention of the art of printing.",
        None,
        NO_TOOL,
        recording="tests/fixtures/ljspeech_LJ001-0005.wav",
        note="A statement to respond to (Gutenberg is the fact a reply is likely to bring up).",
    ),
    _one(
        "fisichella_pt",
        "real_voice",
        "giancarlo fisichella perdeu o controle do carro e acabou a corrida logo após a largada",
        None,
        NO_TOOL,
        language="pt",
        recording="tests/fixtures/languages/pt_fleurs_test_pt002.wav",
        note="News read aloud in Brazilian Portuguese: the reply should be in Portuguese.",
    ),
    _one(
        "seeing_them_forever",
        "real_voice",
        "God bless 'em, I hope I'll go on seeing them forever.",
        None,
        NO_TOOL,
        recording="../shared/fixtures/speech/cmu_arctic_us_axb_a0006.wav",
        note="Only under ../shared, not copied into tests/fixtures.",
    ),
)

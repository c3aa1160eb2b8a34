"""The requests of the answers benchmark (``python -m voice.bench answers``): the single questions, everyday
facts, arithmetic and units, the time, a shop's MCP tools, and requests that need no tool. The conversations
(follow-ups, corrections, other languages, real recordings) are in :mod:`voice.bench.answer_conversations`,
the rubric that scores them in :mod:`voice.bench.answer_rubric`; :data:`REQUESTS` holds them all. Written for
this benchmark.
"""

from __future__ import annotations

from voice.bench.answer_conversations import CORRECTIONS, FOLLOW_UPS, LANGUAGE, REAL_VOICE
from voice.bench.answer_rubric import (  # noqa: F401 - the benchmark's names, from one place
    _NO_ORDER,
    _ORDER_1007,
    _ORDER_4512,
    BUILTIN,
    CATEGORIES,
    NO_TOOL,
    SHOP,
    TOOL_RESULT,
    Expected,
    Request,
    ToolWanted,
    Turn,
    _day,
    _minutes,
    _n,
    _near,
    _one,
    _order,
    _said,
    score_facts,
    score_tool,
    states,
)
from voice.bench.tool_requests import _equals, _timer

EVERYDAY = (
    _one("capital_australia", "everyday", "What's the capital of Australia?", _said(r"canberra"), NO_TOOL),
    _one("spider_legs", "everyday", "How many legs does a spider have?", _said(_n("8", "eight")), NO_TOOL),
    _one(
        "blue_and_yellow",
        "everyday",
        "What colour do you get if you mix blue and yellow?",
        _said(r"\bgreen"),
        NO_TOOL,
    ),
    _one(
        "water_boils",
        "everyday",
        "At what temperature does water boil, in Celsius?",
        _said(_n("100", "(?:one|a) hundred")),
        NO_TOOL,
    ),
    _one("closest_planet", "everyday", "Which planet is closest to the sun?", _said(r"mercury"), NO_TOOL),
    _one(
        "leap_year_days",
        "everyday",
        "How many days are there in a leap year?",
        _said(_n("366", "three hundred (?:and )?sixty[- ]six")),
        NO_TOOL,
    ),
    _one("brazil_language", "everyday", "What language do they speak in Brazil?", _said(r"portuguese"), NO_TOOL),
    _one("romeo_and_juliet", "everyday", "Who wrote Romeo and Juliet?", _said(r"shakespeare"), NO_TOOL),
    _one("largest_ocean", "everyday", "What's the largest ocean in the world?", _said(r"pacific"), NO_TOOL),
    _one(
        "freezing_fahrenheit",
        "everyday",
        "What's the freezing point of water in Fahrenheit?",
        _said(_n("32", "thirty[- ]two")),
        NO_TOOL,
    ),
    _one("continents", "everyday", "How many continents are there?", _said(_n("7", "seven")), NO_TOOL),
    _one(
        "gold_symbol",
        "everyday",
        "What's the chemical symbol for gold?",
        _said(r"\bau\b|\ba[ .-]+u\b"),
        NO_TOOL,
    ),
)

ARITHMETIC = (
    _one(
        "twelve_times_seven",
        "arithmetic",
        "What is twelve times seven?",
        _said(_n("84", "eighty[- ]four")),
        ToolWanted("calculate", _equals(84)),
        needs=BUILTIN,
    ),
    _one(
        "minutes_in_hours",
        "arithmetic",
        "How many minutes are there in three and a half hours?",
        _said(_n("210", "two hundred (?:and )?ten")),
        ToolWanted("calculate", _equals(210)),
        needs=BUILTIN,
    ),
    _one(
        "percent_of",
        "arithmetic",
        "What's fifteen percent of eighty?",
        _said(_n("12", "twelve")),
        ToolWanted("calculate", _equals(12)),
        needs=BUILTIN,
    ),
    _one(
        "centimetres_in_metres",
        "arithmetic",
        "How many centimetres are there in two and a half metres?",
        _said(_n("250", "two hundred (?:and )?fifty")),
        ToolWanted("calculate", _equals(250)),
        needs=BUILTIN,
    ),
    _one(
        "fahrenheit_to_celsius",
        "arithmetic",
        "Can you convert a hundred degrees Fahrenheit to Celsius?",
        _said(r"\b37(?:\.| point )[78]|thirty[- ]seven point (?:seven|eight)", _n("38", "thirty[- ]eight")),
        ToolWanted("calculate", _near(37.7778, 0.05)),
        needs=BUILTIN,
        note="(100 - 32) * 5 / 9 = 37.78; 37.7, 37.8 and about 38 are all right.",
    ),
    _one(
        "divided_by",
        "arithmetic",
        "What's two hundred and fifty-six divided by eight?",
        _said(_n("32", "thirty[- ]two")),
        ToolWanted("calculate", _equals(32)),
        needs=BUILTIN,
    ),
    _one(
        "add_hundreds",
        "arithmetic",
        "What do you get if you add three hundred and seventy-five and four hundred and eighty-six?",
        _said(_n("861", "eight hundred (?:and )?sixty[- ]one")),
        ToolWanted("calculate", _equals(861)),
        needs=BUILTIN,
    ),
    _one(
        "thirteen_squared",
        "arithmetic",
        "What's thirteen squared?",
        _said(_n("169", "(?:one|a) hundred (?:and )?sixty[- ]nine")),
        ToolWanted("calculate", _equals(169)),
        needs=BUILTIN,
    ),
    _one(
        "split_the_bill",
        "arithmetic",
        "We're splitting a bill of a hundred and twenty-four dollars fifty between three people. How much does each"
        " of us pay?",
        _said(
            r"\$?41(?:\.| dollars (?:and )?| point )50?\b",
            r"forty[- ]one (?:dollars )?(?:and )?fifty|forty[- ]one point five",
        ),
        ToolWanted("calculate", _equals(41.5)),
        needs=BUILTIN,
    ),
    _one(
        "miles_to_kilometres",
        "arithmetic",
        "How many kilometres is ten miles?",
        _said(
            _n("16", "sixteen"),
            r"\b16(?:\.| point )\d|sixteen point",
            none_of=(r"(?<![\d.])6(?:\.| point )2\b|six point two",),
        ),
        ToolWanted("calculate", _near(16.0934, 0.1)),
        needs=BUILTIN,
        note="10 miles = 16.09 km; the wrong way round is 6.2.",
    ),
)

TIME = (
    _one(
        "time_now",
        "time",
        "What time is it?",
        _said(TOOL_RESULT + r"\d{1,2}:\d\d"),
        ToolWanted("get_current_time"),
        needs=BUILTIN,
    ),
    _one(
        "date_today",
        "time",
        "What's today's date?",
        _said(TOOL_RESULT + r"\d{1,2} [^\W\d_]+"),
        ToolWanted("get_current_time"),
        needs=BUILTIN,
    ),
    _one(
        "day_of_week",
        "time",
        "What day of the week is it today?",
        _said(TOOL_RESULT + r"[^\W\d_]+day\b"),
        ToolWanted("get_current_time"),
        needs=BUILTIN,
    ),
    _one(
        "timer_ten_minutes",
        "time",
        "Set a timer for ten minutes.",
        _said(_minutes("10", "ten")),
        ToolWanted("set_timer", _timer(600)),
        needs=BUILTIN,
    ),
    _one(
        "remind_ninety_seconds",
        "time",
        "Remind me in ninety seconds.",
        _said(
            r"(?:(?<![\d.,])90|\bninety)[- ]?sec",
            r"minute and (?:a half|30|thirty)",
            r"(?:\b1|\bone)(?:\.5| and a half| point five)[- ]?min",
        ),
        ToolWanted("set_timer", _timer(90)),
        needs=BUILTIN,
    ),
    _one(
        "timer_half_hour",
        "time",
        "Could you set a timer for half an hour, please?",
        _said(_minutes("30", "thirty"), r"half[- ]an[- ]hour|half-hour"),
        ToolWanted("set_timer", _timer(1800)),
        needs=BUILTIN,
    ),
)

SHOP_REQUESTS = (
    _one(
        "order_4512",
        "shop",
        "Where is my order 4512?",
        _ORDER_4512,
        ToolWanted("get_order_status", _order("4512")),
        needs=SHOP,
    ),
    _one(
        "order_one_zero_zero_seven",
        "shop",
        "Can you check order number one zero zero seven, please?",
        _ORDER_1007,
        ToolWanted("get_order_status", _order("1007")),
        needs=SHOP,
    ),
    _one(
        "opens_saturday",
        "shop",
        "When does the shop open on Saturday?",
        _said(_n("0?9", "nine")),
        ToolWanted("get_store_hours", _day("saturday")),
        needs=SHOP,
    ),
    _one(
        "closes_friday",
        "shop",
        "How late is the shop open on Friday?",
        _said(_n("0?6", "six"), r"\b18[:.]?00\b"),
        ToolWanted("get_store_hours", _day("friday")),
        needs=SHOP,
    ),
    _one(
        "order_unknown",
        "shop",
        "Has my order two two zero three shipped yet?",
        _said(_NO_ORDER, none_of=(r"shipped on|arriv|being packed|ships today",)),
        ToolWanted("get_order_status", _order("2203")),
        needs=SHOP,
        note="The shop has no order 2203: the reply must say so, not make up a status.",
    ),
    _one(
        "order_arrival",
        "shop",
        "My order number is forty-five twelve. When will it get here?",
        _said(r"tomorrow", none_of=(r"ships today|being packed",)),
        ToolWanted("get_order_status", _order("4512")),
        needs=SHOP,
        note='"Forty-five twelve" is how people say 4512.',
    ),
)

NO_TOOL_REQUESTS = (
    _one("joke_cats", "no_tool", "Tell me a joke about cats.", None, NO_TOOL),
    _one("how_are_you", "no_tool", "How are you today?", None, NO_TOOL),
    _one("dog_name", "no_tool", "What's a good name for a dog?", None, NO_TOOL),
    _one("recommend_book", "no_tool", "Can you recommend a book?", None, NO_TOOL),
    _one("boil_egg", "no_tool", "How do I boil an egg?", None, NO_TOOL),
    _one(
        "time_flies",
        "no_tool",
        "What does 'time flies' mean?",
        _said(r"quick|fast|rapid|pass|go(?:es)? by|slip|without (?:you )?noticing"),
        NO_TOOL,
        note="About time, not a request for it.",
    ),
    _one("lucky_seven", "no_tool", "Is seven a lucky number?", None, NO_TOOL),
    _one("favourite_number", "no_tool", "What's your favourite number?", None, NO_TOOL),
    _one("say_something_nice", "no_tool", "Say something nice.", None, NO_TOOL),
    _one(
        "thanks_timer",
        "no_tool",
        "Thanks, that's all I needed to know about the timer.",
        None,
        NO_TOOL,
        note="Thanks, not a goodbye: no timer and no hanging up.",
    ),
)

REQUESTS: tuple[Request, ...] = (
    EVERYDAY + ARITHMETIC + TIME + SHOP_REQUESTS + NO_TOOL_REQUESTS + FOLLOW_UPS + CORRECTIONS + LANGUAGE + REAL_VOICE
)

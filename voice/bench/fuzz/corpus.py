"""The fuzz corpus: every category of :mod:`voice.bench.messages` plus random mutations, from one seed."""

from __future__ import annotations

import random

from voice.bench.fuzz.messages import (
    CATEGORIES,
    DIALECTS,
    REALTIME,
    TEMPLATES,
    WS,
    Fuzz,
    _bad_type,
    _base64_garbage,
    _binary,
    _deep,
    _dumps,
    _field_fuzz,
    _floods,
    _fresh,
    _invalid_json,
    _not_object,
    _out_of_order,
    _oversized,
    _random_char,
    _unknown,
    _ws_frames,
)

# -- mutations -----------------------------------------------------------------


_TOKENS = ('{', '}', '[', ']', '"', ',', ':', '\\', '\\u', '\\ud800', 'null', 'true', '1e999', '-', '\n', '\x00',
           '""', '{}', '[]', 'NaN', '9' * 40, '"type"', '"hello"')  # fmt: skip


def mutate(text: str, rng: random.Random) -> str:
    """``text`` with 1 to 4 random edits: a character replaced, deleted or put in, a span repeated, a token put in."""
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(chars) + 1)
        if op == 0 and i < len(chars):
            chars[i] = _random_char(rng)
        elif op == 1 and i < len(chars):
            del chars[i : i + rng.randint(1, 8)]
        elif op == 2:
            chars.insert(i, _random_char(rng))
        elif op == 3 and chars:
            j = rng.randrange(len(chars))
            chars[i:i] = chars[j : j + rng.randint(1, 16)] * rng.randint(1, 3)
        elif op == 4:
            chars[i:i] = list(rng.choice(_TOKENS))
        elif i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def _mutations(rng: random.Random, n: int) -> list[Fuzz]:
    """``n`` valid messages with random edits, half of each dialect."""
    out = []
    for i in range(n):
        dialect = DIALECTS[i % 2]
        name = rng.choice(list(TEMPLATES[dialect]))
        text = mutate(_dumps(TEMPLATES[dialect][name]), rng)
        out.append(Fuzz(dialect, "mutation", (text,), f"{name} mutated", _fresh(dialect, name)))
    return out


# -- the corpus ----------------------------------------------------------------


def corpus(seed: int, total: int, flood_share: float = 0.2) -> list[Fuzz]:
    """At least ``total`` messages over both dialects, every category in it, in a seeded order.

    The crafted cases come first in the budget (all of them when they fit in
    half of it, else a seeded sample of each category's, at least 2 each);
    floods take ``flood_share``; random mutations of valid messages fill the rest.
    """
    rng = random.Random(seed)
    crafted: list[Fuzz] = []
    for dialect in DIALECTS:
        crafted += _invalid_json(dialect, rng)
        crafted += _deep(dialect)
        crafted += _not_object(dialect)
        crafted += _bad_type(dialect)
        crafted += _unknown(dialect, rng)
        crafted += _field_fuzz(dialect)
        crafted += _oversized(dialect)
        crafted += _out_of_order(dialect)
        crafted += _binary(dialect, rng)
        crafted += _ws_frames(dialect)
    crafted += _base64_garbage(rng)
    budget = total // 2
    if sum(f.messages for f in crafted) > budget:
        share = budget / sum(f.messages for f in crafted)
        sampled: list[Fuzz] = []
        for category in CATEGORIES:
            for dialect in DIALECTS:
                group = [f for f in crafted if f.category == category and f.dialect == dialect]
                if group:
                    sampled += rng.sample(group, min(len(group), max(2, round(len(group) * share))))
        crafted = sampled
    flood_size = max(20, round(total * flood_share / 10))  # 5 floods per dialect
    floods = _floods(WS, flood_size) + _floods(REALTIME, flood_size)
    used = sum(f.messages for f in crafted + floods)
    items = crafted + floods + _mutations(rng, max(0, total - used))
    rng.shuffle(items)
    return items

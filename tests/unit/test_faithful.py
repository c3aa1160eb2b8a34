"""A tool's result read back as given (core/faithful.py): an answer that misreads its numbers says the result."""

from __future__ import annotations

from core.faithful import misread, numbers_in, read_back

STOCK = "AAPL last traded at 187 dollars and 42 cents."


def test_a_number_nothing_gave_is_misread_a_rounded_one_is_not():
    known = numbers_in(STOCK)
    assert misread("AAPL last traded at 187.42 cents.", known)
    assert not misread("Apple last traded at 187 dollars and 42 cents.", known)
    assert not misread("It is about 37.78 degrees.", numbers_in("37.77777777777778"))
    assert misread("It is about 38.5 degrees.", numbers_in("37.77777777777778"))
    assert numbers_in("It costs 1,250.5 dollars, or 3 euros.") == ["1250.5", "3"]
    assert not misread("No numbers here.", [])


def test_the_misread_chunk_is_the_result_said_once():
    chunks = ["Sure.", "AAPL last traded at 187.42 cents.", "That is 187.42 today."]
    out, said = read_back(chunks, numbers_in(STOCK), STOCK, said=False)
    assert out == ["Sure.", STOCK] and said
    assert read_back(["Its price is 187.42."], numbers_in(STOCK), STOCK, said=True) == ([], True)

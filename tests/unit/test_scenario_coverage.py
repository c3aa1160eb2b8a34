"""``--coverage``: the steps and transitions of each agent its scenarios reached, from their events."""

from __future__ import annotations

from pathlib import Path

from core.events import StepEntered
from voice.agent import load_agent
from voice.scenario.coverage import coverage, coverage_table

ROOT = Path(__file__).resolve().parents[2]
RESTAURANT = str(ROOT / "agents" / "restaurant.yaml")


def entered(step: str, previous: str = "", via: str = "", response: int = 1) -> StepEntered:
    return StepEntered(0.0, step=step, previous=previous, response=response, via=via)


def test_the_steps_and_transitions_no_scenario_reached_are_listed():
    flow = load_agent(RESTAURANT).flow
    booking = [
        entered("greeting", response=0),
        entered("details", "greeting", "wants_booking"),
        entered("confirm", "details", "details_complete"),
        entered("book", "confirm", "confirmed"),
        entered("goodbye", "book", "done"),
    ]
    handover = [entered("greeting", response=0), entered("handover", "greeting", "wants_person")]
    (cov,) = coverage([("booking", RESTAURANT, flow, booking), ("handover", RESTAURANT, flow, handover)])
    assert cov.scenarios == ["booking", "handover"] and cov.missed_steps() == []
    assert cov.missed_transitions() == [
        ("details", "wants_person", "handover"),
        ("confirm", "change_details", "details"),
    ]
    text = coverage_table([cov])
    assert "(2 scenarios): steps 6 of 6, transitions 5 of 7" in text
    assert "  not taken: confirm --change_details--> details" in text


def test_a_step_no_scenario_reached_is_named():
    flow = load_agent(RESTAURANT).flow
    (cov,) = coverage([("hello", RESTAURANT, flow, [entered("greeting", response=0)])])
    assert cov.missed_steps() == ["details", "confirm", "book", "goodbye", "handover"]
    assert "steps no scenario reached: details, confirm, book, goodbye, handover" in coverage_table([cov])


def test_the_agent_file_is_named_as_short_as_it_can_be():
    flow = load_agent(RESTAURANT).flow
    (cov,) = coverage([("hello", "scenarios/../agents/restaurant.yaml", flow, [entered("greeting", response=0)])])
    assert coverage_table([cov]).startswith("agents/restaurant.yaml (1 scenario): steps 1 of 6")

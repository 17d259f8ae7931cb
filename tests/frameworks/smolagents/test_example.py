"""``examples/smolagents_agent.py`` runs as written and shows the loop being caught."""

from __future__ import annotations

from ..examples import run


def test_the_example_stops_the_loop() -> None:
    assert "the tool ran 20 times; stopped after 22 model calls:" in run("smolagents_agent.py")

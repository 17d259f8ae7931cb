"""``examples/langgraph_agent.py`` runs as written and shows the loop being caught."""

from __future__ import annotations

from ..examples import run


def test_the_example_stops_the_loop() -> None:
    assert "stopped after 21 model calls: ping_pong, abort" in run("langgraph_agent.py")

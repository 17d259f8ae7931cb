"""``examples/pydantic_ai_agent.py`` runs as written and shows the loop being caught."""

from __future__ import annotations

from ..examples import run


def test_the_example_stops_the_loop() -> None:
    assert "the tool ran 20 times; the agent answered: I am not making progress" in run(
        "pydantic_ai_agent.py"
    )

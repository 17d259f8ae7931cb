"""``examples/langchain_openinference.py`` runs as written and shows the loop being caught."""

from __future__ import annotations

from ..examples import run


def test_the_example_stops_the_loop() -> None:
    assert "polled 20 times; the agent answered: The build is stuck" in run(
        "langchain_openinference.py"
    )

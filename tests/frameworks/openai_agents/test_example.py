"""``examples/openai_agents_sdk.py`` runs as written and shows the loop being caught."""

from __future__ import annotations

from ..examples import run


def test_the_example_stops_the_loop() -> None:
    assert "the tool ran 20 times; the agent answered: Stuck; giving up." in run(
        "openai_agents_sdk.py"
    )

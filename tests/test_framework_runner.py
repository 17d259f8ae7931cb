"""``tests/frameworks/run.py --newest``: which packages it unpins, and that its table reports
without failing (the frameworks themselves are not installed here)."""

from __future__ import annotations

import pytest

from tests.frameworks import run


def test_every_framework_suite_names_the_packages_newest_unpins() -> None:
    assert set(run.FRAMEWORK_PACKAGES) == set(run.frameworks())
    for name in run.frameworks():
        pinned = {run.requirement_name(line) for line in run.pinned(name)}
        assert set(run.FRAMEWORK_PACKAGES[name]) <= pinned, name


def test_newest_unpins_the_framework_and_keeps_the_other_pins() -> None:
    requirements = (
        "smolagents==1.26.0\nopeninference-instrumentation-smolagents==0.1.43\npytest==9.2.0\n"
    )
    assert run.unpinned("smolagents", requirements).split() == [
        "smolagents",
        "openinference-instrumentation-smolagents==0.1.43",
        "pytest==9.2.0",
    ]


def test_newest_refuses_a_framework_package_the_suite_does_not_pin() -> None:
    with pytest.raises(ValueError, match=r"smolagents.s requirements\.txt does not pin smolagents"):
        run.unpinned("smolagents", "pytest==9.2.0\n")


def test_the_newest_report_names_each_result_and_never_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcomes = [
        run.Outcome("smolagents", 1, 30.0, 12.0, "", "smolagents 9.0.0"),
        run.Outcome("llama_index", 0, 40.0, 20.0, "", "llama-index-core 9.1.0"),
    ]
    assert run.report_newest(outcomes) == 0
    lines = capsys.readouterr().out.splitlines()
    pinned = dict(line.split("==") for line in run.pinned("smolagents"))["smolagents"]
    assert lines[1].split()[:2] == ["llama_index", "passed"]
    assert lines[2].split()[:2] == ["smolagents", "FAILED"]
    assert lines[2].endswith(f"smolagents 9.0.0 ({pinned})")
    assert lines[-1].startswith("newest releases: 1 passed, 1 failed (smolagents)")

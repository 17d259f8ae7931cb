"""Loops whose text changes found by ``otel-loopguard replay`` in agents' own logs: the samples
shipped as test data are cut from the real runs that motivated the detectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.cli.main import main

DATA = Path(__file__).parent / "data" / "agent_logs"


def test_a_script_rerun_with_quoting_variants_is_a_shape_cycle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", str(DATA / "pylint-dev__pylint-8898.traj.json")]) == 0
    assert "#8-9  bash                         warning [shape_cycle, count 4..5]" in (
        capsys.readouterr().out
    )


def test_a_refused_edit_resent_as_it_is_is_warned_blocked_then_aborted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", str(DATA / "django__django-12497.traj")]) == 0
    out = capsys.readouterr().out
    assert "#11-12  edit                         warning [edit_resubmitted, count 3..4]" in out
    assert "#13  edit                         BLOCKED [edit_resubmitted, count 5]" in out
    assert "=> aborted at call #14 of 16" in out


def _reply(content: str, tokens: int = 1000) -> dict[str, object]:
    usage = {"prompt_tokens": tokens, "completion_tokens": 20}
    return {"role": "assistant", "content": content, "extra": {"response": {"usage": usage}}}


def test_replies_rejected_for_their_format_warn_on_the_model_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rejected = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
        _reply("THOUGHT: look\n\n```bash\nls\n```"),
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    ]
    for _ in range(5):
        messages += [
            _reply("```bash\nls\n```\n```bash\npwd\n```"),
            {"role": "user", "content": rejected},
        ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}))
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "#1  (model reply)                warning [no_tool_streak, count 5]" in out

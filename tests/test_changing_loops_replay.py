"""Loops whose text changes found by ``otel-loopguard replay`` in agents' own logs: the samples
shipped as test data are cut from the real runs that motivated the detectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_loopguard.cli.main import main

DATA = Path(__file__).parent / "data" / "agent_logs"


def test_a_script_rerun_with_other_option_texts_is_not_a_shape_cycle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # pylint re-run with five different regular expressions: five steps, each read anew.
    assert main(["replay", str(DATA / "pylint-dev__pylint-8898.traj.json")]) == 0
    out = capsys.readouterr().out
    assert "== summary: 1 runs, 14 tool calls" in out
    assert "no detections" in out


def test_a_script_rerun_with_only_its_quoting_changed_is_a_shape_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = "<returncode>16</returncode>\n<output>\nbad-names-rgxs: bad regex\n</output>"
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "task"},
    ]
    for quoted in ["'foo,bar'", '"foo,bar"'] * 3:
        messages += [
            _reply(f"THOUGHT: again\n\n```bash\npylint --bad-names-rgxs={quoted} foo.py\n```"),
            {"role": "user", "content": failed},
        ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}))
    assert main(["replay", str(path)]) == 0
    assert "#4-6  bash                         warning [shape_cycle, count 4..6]" in (
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
    for _ in range(4):
        messages += [
            _reply("```bash\nls\n```\n```bash\npwd\n```"),
            {"role": "user", "content": rejected},
        ]
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages}))
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "#1  (model reply)                warning [no_tool_streak, count 3]" in out
    assert "count 4" not in out  # the fourth is no multiple of three

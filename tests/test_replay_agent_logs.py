"""Agents' own logs read as runs by ``otel-loopguard replay``: mini-swe-agent and SWE-agent
trajectories (trimmed from real runs of the public corpora, tests/data/agent_logs) and a Claude
Code session transcript written in its format (docs/replay.md gives the mapping)."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.cli.main import main
from otel_loopguard.engine.replay import COMPACTION, Call, Spent
from otel_loopguard.recorded import agent_logs, claude_code
from otel_loopguard.recorded.agent_logs import AgentLogError, format_of
from otel_loopguard.recorded.claude_code import read_claude_code
from otel_loopguard.recorded.runs import RecordedCall, RecordedRun
from otel_loopguard.recorded.trajectories import read_mini_swe_agent, read_swe_agent

from .test_cli import run

DATA = Path(__file__).parent / "data" / "agent_logs"
MINI = DATA / "pylint-dev__pylint-8898.traj.json"
SWE_AGENT = DATA / "django__django-12497.traj"
CLAUDE = DATA / "claude-code-session.jsonl"
SESSION = "7f3c2a90-5b1e-4c8e-9d2a-1e6f0b4c3d21"


def _calls(run: RecordedRun) -> list[Call]:
    return [item.call for item in run.items if isinstance(item, RecordedCall)]


def _spent(run: RecordedRun) -> list[Spent]:
    return [item for item in run.items if isinstance(item, Spent)]


def test_mini_swe_agent_replies_are_model_calls_and_bash_blocks_tool_calls() -> None:
    document = json.loads(MINI.read_text())
    replies = [m for m in document["messages"] if m["role"] == "assistant"]
    run = read_mini_swe_agent(str(MINI), {})
    assert (run.key, run.root, run.service) == (
        "pylint-dev__pylint-8898",
        "mini-swe-agent",
        "google/gemini-3-pro-preview",
    )
    spent, calls = _spent(run), _calls(run)
    assert len(spent) == len(replies) == 15
    # Each model call carries its response's usage and cost, as recorded.
    usage = replies[0]["extra"]["response"]["usage"]
    assert spent[0].usage.input == usage["prompt_tokens"]
    assert spent[0].usage.output == usage["completion_tokens"]
    assert spent[0].usage.cached == usage["prompt_tokens_details"]["cached_tokens"]
    assert spent[0].usage.cost == pytest.approx(usage["cost"])
    assert spent[0].started == replies[0]["extra"]["response"]["created"]
    # The reply with two bash blocks was rejected for its format: a model call, no tool call,
    # one that counts in a streak of rejected replies.
    assert [s.tool_calls for s in spent].count(0) == 1
    assert [s.reply for s in spent].count("rejected") == 1
    assert {s.reply for s in spent} == {"tool", "rejected"}
    assert len(calls) == 14
    first = document["messages"][document["messages"].index(replies[0]) + 1]["content"]
    assert calls[0] == Call(
        "bash", {"command": "cp pylint/utils/utils.py pylint/utils/utils.py.bak"}, first
    )
    # A command that returned non-zero failed; its outcome is still the observation's text.
    failed = [n for n, c in enumerate(calls, 1) if c.error is not None]
    assert failed == [3, *range(5, 13)]
    assert all(c.error == c.result for c in calls if c.error is not None)
    assert calls[4].error is not None
    assert calls[4].error.startswith("<returncode>16</returncode>")
    # The five quoting variants of one pylint run, all with the same output (the labelled loop).
    pylint = calls[4:9]
    assert len({c.args["command"] for c in pylint}) == 5
    assert len({c.result for c in pylint}) == 1


def test_swe_agent_commands_are_their_own_tools_and_the_totals_are_apportioned() -> None:
    document = json.loads(SWE_AGENT.read_text())
    run = read_swe_agent(str(SWE_AGENT), {})
    calls, spent = _calls(run), _spent(run)
    assert (run.key, run.root) == ("django__django-12497", "SWE-agent")
    assert [c.tool for c in calls] == [
        "search_dir",
        "search_dir",
        "open",
        "search_file",
        "goto",
        *["edit"] * 9,
        "goto",
        "submit",
    ]
    step = document["trajectory"][2]
    assert calls[2].args == {"command": step["action"]}
    assert calls[2].result == step["observation"]
    # An edit the linter rejected failed; the same edit resubmitted byte for byte is one call.
    rejected = calls[8:14]
    assert all(c.error is not None and c.error.startswith("Your proposed edit") for c in rejected)
    assert len({(c.args["command"], c.result) for c in rejected}) == 1
    # Only the run's totals are recorded: spread over its steps, summing to them exactly.
    assert sum(s.usage.input for s in spent) == 186397
    assert sum(s.usage.output for s in spent) == 4246
    assert sum(s.usage.cost for s in spent) == pytest.approx(1.99135)
    later = [s.usage.input for s in spent]
    assert later == sorted(later)  # each step is sent the conversation so far: no less


def _swe_agent(tmp_path: Path, steps: list[dict[str, Any]], stats: object) -> str:
    path = tmp_path / "x.traj"
    path.write_text(
        json.dumps({"trajectory": steps, "history": [], "info": {"model_stats": stats}})
    )
    return str(path)


def test_swe_agents_own_exits_and_empty_actions_are_not_calls(tmp_path: Path) -> None:
    steps = [
        {"action": "ls\n", "observation": "a.py\n", "response": "ls"},
        {"action": "  \n", "observation": "", "response": "thinking aloud"},
        {"action": "exit_cost", "observation": "Exited (autosubmitted)", "response": ""},
    ]
    stats = {"tokens_sent": 100, "tokens_received": 10, "instance_cost": 0.5}
    run = read_swe_agent(_swe_agent(tmp_path, steps, stats), {})
    assert [c.tool for c in _calls(run)] == ["bash"]
    assert [s.tool_calls for s in _spent(run)] == [1, 0]
    assert [s.reply for s in _spent(run)] == ["tool", "rejected"]  # a step with no action
    assert sum(s.usage.tokens for s in _spent(run)) == 110


def test_claude_code_responses_tools_and_results() -> None:
    (main_run, subagent) = read_claude_code(str(CLAUDE), {})
    assert (main_run.key, main_run.root) == (SESSION, "Claude Code")
    assert main_run.service == "claude-sonnet-4-5-20250929"
    assert subagent.key == f"{SESSION} agent a4f1c2e"
    calls = _calls(main_run)
    assert [c.tool for c in calls[:5]] == ["Read", "Grep", "Glob", "Task", "Edit"]
    assert calls[0].args == {"file_path": "/home/dev/app/src/parse.py"}
    assert calls[0].call_id == "toolu_01Test0001"
    assert calls[0].error is None
    assert calls[0].result is not None
    assert calls[0].result.startswith("     1\tdef parse")
    # A result given as content blocks reads as their text; is_error makes a failure.
    assert calls[3].result == "One caller: src/cli.py:12."
    tests = [c for c in calls if c.tool == "Bash" and "pytest" in str(c.args)]
    assert len(tests) == 11
    assert all(c.error == c.result and "1 failed" in c.error for c in tests)
    assert calls[-2].error is not None
    assert "rejected" in calls[-2].error
    assert calls[-1].result is None
    assert calls[-1].error is None
    assert [c.tool for c in _calls(subagent)] == ["Grep"]
    assert COMPACTION in main_run.items


def test_claude_code_counts_a_response_of_several_lines_once_with_its_final_usage() -> None:
    (main_run, subagent) = read_claude_code(str(CLAUDE), {})
    spent = _spent(main_run)
    # Responses, not lines: the first is written as three lines (thinking, text, tool use),
    # the synthetic error message is no model call.
    lines = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    main_ids = {
        line["message"]["id"]
        for line in lines
        if line["type"] == "assistant"
        and not line["isSidechain"]
        and line["message"]["model"] != "<synthetic>"
    }
    assert len(spent) == len(main_ids) == 17
    first = spent[0]
    # Input counts the cache reads and writes (Anthropic's input_tokens does not).
    assert (first.usage.input, first.usage.cached, first.usage.output) == (12604, 12000, 180)
    assert first.model == "claude-sonnet-4-5-20250929"
    assert first.tool_calls == 1
    assert spent[1].tool_calls == 2  # two tool uses in one response
    assert [s.tool_calls for s in _spent(subagent)] == [1, 0]
    # A reply that called no tool ends the sub-agent's turn: an answer, not a rejected reply.
    assert [s.reply for s in _spent(subagent)] == ["tool", "answer"]


def test_claude_code_cost_comes_from_the_prices_given() -> None:
    prices = {"claude-sonnet-4-5-20250929": (3.0, 15.0, 0.3)}
    (main_run, _) = read_claude_code(str(CLAUDE), prices)
    first = _spent(main_run)[0]
    assert first.usage.cost == pytest.approx((604 * 3.0 + 12000 * 0.3 + 180 * 15.0) / 1e6)


def test_replay_reads_every_kind_of_log_and_names_its_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["replay", "--all", str(MINI), str(SWE_AGENT), str(CLAUDE)]) == 0
    out = capsys.readouterr().out
    assert "== run pylint-dev__pylint-8898  mini-swe-agent (google/gemini-3-pro-preview): 14" in out
    assert "== run django__django-12497  SWE-agent: 16 tool calls" in out
    # The eleventh identical test run with the same failure warns, as in a live session (a
    # read failing alike is no refused action: generic_repeat's, not call_resubmitted's).
    assert f"== run {SESSION}  Claude Code" in out
    assert "#16  Bash                         warning [generic_repeat, count 10]" in out
    assert "call_resubmitted" not in out
    assert "== summary: 4 runs, 49 tool calls" in out


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.traj.json", "{}", "mini-swe-agent"),
        ("a.TRAJ", "{}", "swe-agent"),
        ("session.jsonl", '{"type": "summary", "summary": "x"}\n', "claude-code"),
        ("spans.jsonl", '{"resourceSpans": []}\n', "otlp"),
        ("run.json", '{"trajectory_format": "mini-swe-agent-1", "messages": []}', "mini-swe-agent"),
        ("run.json", '{"trajectory": [], "history": []}', "swe-agent"),
        ("spans.json", '{\n  "resourceSpans": []\n}', "otlp"),
        ("spans.bin", "\x0a\x00", "otlp"),
    ],
)
def test_a_files_format_is_told_by_its_name_then_its_first_line(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert format_of(str(path)) == expected


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.traj.json", "[]", "not a mini-swe-agent trajectory: the file holds a JSON list"),
        ("a.traj.json", "{", "not a mini-swe-agent trajectory: not JSON"),
        ("a.traj.json", '{"messages": {}}', "no 'messages' list"),
        ("a.traj.json", '{"messages": [3]}', "message 0 is not an object"),
        ("a.traj", '{"history": []}', "no 'trajectory' list"),
        ("a.traj", '{"trajectory": [{"observation": ""}]}', "step 0 has no 'action' text"),
        (
            "a.traj",
            '{"trajectory": [], "info": {"model_stats": 3}}',
            "'info.model_stats' is neither an object nor a dict's text",
        ),
        ("s.jsonl", '{"type": "user"}\nnot json\n{}\n', "line 2 is not JSON"),
        ("s.jsonl", '{"type": "user"}\n[1]\n', "line 2 is not a JSON object"),
        ("a.traj.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_log_that_cannot_be_read_is_one_clear_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"otel-loopguard: error: {path}: ")
    assert message in err
    assert "Traceback" not in err


def test_a_transcripts_last_line_cut_short_is_left_out(tmp_path: Path) -> None:
    """Claude Code appends to a live session's file: a copy may end inside a line."""
    path = tmp_path / "s.jsonl"
    whole = CLAUDE.read_text()
    path.write_text(whole + whole.splitlines()[5][:40])
    assert len(_calls(read_claude_code(str(path), {})[0])) == 18  # as in the whole file


def test_reads_are_bounded_by_the_documented_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_logs, "MAX_DOCUMENT_BYTES", 1024)
    with pytest.raises(AgentLogError, match=r"larger than 0 MiB is not read \(MAX_DOCUMENT"):
        read_mini_swe_agent(str(MINI), {})
    monkeypatch.setattr(claude_code, "MAX_TRANSCRIPT_LINE_BYTES", 512)
    with pytest.raises(AgentLogError, match=r"line 3 is longer than 0 MiB \(MAX_TRANSCRIPT_LINE"):
        read_claude_code(str(CLAUDE), {})


def _projects(home: Path) -> tuple[Path, Path]:
    """Claude Code's layout under ``home``: the session's transcript, and its subagent's in
    ``<session>/subagents/agent-<id>.jsonl`` (as Claude Code 2.x writes a subagent's run)."""
    project = home / ".claude" / "projects" / "-home-dev-app"
    lines = CLAUDE.read_text().splitlines()
    main_lines = [line for line in lines if not json.loads(line).get("isSidechain")]
    sub_lines = [line for line in lines if json.loads(line).get("isSidechain")]
    session = project / f"{SESSION}.jsonl"
    subagent = project / SESSION / "subagents" / "agent-a4f1c2e.jsonl"
    subagent.parent.mkdir(parents=True)
    session.write_text("\n".join(main_lines) + "\n")
    subagent.write_text("\n".join(sub_lines) + "\n")
    return session, subagent


def _documented_glob(page: str) -> str:
    text = (Path(__file__).resolve().parent.parent / "docs" / page).read_text()
    command = next(
        line for line in text.splitlines() if line.startswith("otel-loopguard replay ~/.claude")
    )
    return command.split()[2]


@pytest.mark.parametrize("page", ["replay.md", "coding-agents.md"])
def test_the_documented_glob_finds_the_sessions_and_their_subagents(
    tmp_path: Path, page: str
) -> None:
    session, subagent = _projects(tmp_path)
    pattern = _documented_glob(page).replace("~", str(tmp_path), 1)
    # Python's recursive glob reads ** as zsh and bash's globstar do.
    assert sorted(glob.glob(pattern, recursive=True)) == sorted([str(session), str(subagent)])


def test_a_subagents_own_transcript_is_its_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session, subagent = _projects(tmp_path)
    assert main(["replay", "--all", str(session), str(subagent)]) == 0
    out = capsys.readouterr().out
    assert f"== run {SESSION}  Claude Code (claude-sonnet-4-5-20250929): 18 tool calls" in out
    assert (
        f"== run {SESSION} agent a4f1c2e  Claude Code (claude-sonnet-4-5-20250929): 1 tool calls"
        in out
    )
    assert "== summary: 2 runs, 19 tool calls" in out


def _codex_rollout() -> str:
    """A Codex CLI session log (``~/.codex/sessions/.../rollout-*.jsonl``) as Codex writes it."""
    lines: list[dict[str, Any]] = [
        {
            "timestamp": "2026-03-01T10:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": "0199a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b",
                "timestamp": "2026-03-01T10:00:00.000Z",
                "cwd": "/home/dev/app",
                "originator": "codex_cli_rs",
                "cli_version": "0.171.0",
            },
        },
        {
            "timestamp": "2026-03-01T10:00:01.000Z",
            "type": "turn_context",
            "payload": {"cwd": "/home/dev/app", "approval_policy": "on-request", "model": "gpt-5"},
        },
    ]
    for n in range(25):
        call = f"call_{n:04d}"
        lines.append(
            {
                "timestamp": "2026-03-01T10:00:02.000Z",
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["bash", "-lc", "pytest -x"]}),
                    "call_id": call,
                },
            }
        )
        lines.append(
            {
                "timestamp": "2026-03-01T10:00:03.000Z",
                "type": "response_item",
                "payload": {
                    "type": "function_call_output",
                    "call_id": call,
                    "output": json.dumps({"output": "1 failed", "metadata": {"exit_code": 1}}),
                },
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_a_codex_session_log_is_no_claude_code_transcript(tmp_path: Path) -> None:
    path = tmp_path / "rollout-2026-03-01T10-00-00-0199a2b4.jsonl"
    path.write_text(_codex_rollout())
    assert format_of(str(path)) != "claude-code"
    result = run("replay", str(path))
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"otel-loopguard: error: {path}: ")
    for named in ("OTLP", "mini-swe-agent (.traj.json)", "SWE-agent (.traj)", "Claude Code"):
        assert named in line


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "session_meta", "payload": {"id": "x"}}\n',
        '{"type": "message", "role": "user", "content": "hi"}\n',
        '{"type": "event", "name": "x"}\n',
    ],
)
def test_a_jsonl_file_of_another_agent_is_an_error_naming_what_replay_reads(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(text * 3)
    result = run("replay", str(path))
    assert result.returncode == 2, result.stdout
    assert "replay reads OTLP traces" in result.stderr
    assert "Claude Code transcripts" in result.stderr


def test_a_transcript_with_no_conversation_is_a_run_of_no_calls(tmp_path: Path) -> None:
    """Claude Code leaves transcripts of summaries or file snapshots only: a session in which
    nothing was called, not a file replay cannot read."""
    path = tmp_path / "5d0c3b1a-2e4f-4a6b-8c9d-0e1f2a3b4c5d.jsonl"
    snapshot = {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}}
    path.write_text(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u"}) + "\n")
    with path.open("a") as file:
        file.write(json.dumps(snapshot) + "\n")
    result = run("replay", "--all", str(path))
    assert result.returncode == 0, result.stderr
    assert "== run 5d0c3b1a-2e4f-4a6b-8c9d-0e1f2a3b4c5d  Claude Code: 0 tool calls" in result.stdout
    assert "== summary: 1 runs, 0 tool calls" in result.stdout

"""``otel-loopguard replay`` on hostile agents' logs (trajectories, transcripts) and prices
files: one line of error naming the file and exit status 2, or the report, in bounded time;
never a traceback. Each file is written to ``tmp_path`` and replayed by the real command."""

from __future__ import annotations

import itertools
import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_loopguard.recorded.trajectories import mini_swe_agent_actions

from .test_cli import run

DATA = Path(__file__).parent / "data" / "agent_logs"
CLAUDE = DATA / "claude-code-session.jsonl"
HUGE = 10**400
"""A count no float holds (``float(HUGE)`` overflows)."""


def _replay_error(path: Path) -> str:
    result = run("replay", str(path))
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, (result.stdout[-500:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"otel-loopguard: error: {path}: ")
    return lines[0]


def _swe_agent(stats: dict[str, Any]) -> str:
    step = {"action": "ls", "observation": "a.py", "response": "ls"}
    return json.dumps({"trajectory": [step], "history": [], "info": {"model_stats": stats}})


def _mini(usage: dict[str, Any], created: object = 1.7e9) -> str:
    reply = {
        "role": "assistant",
        "content": "```bash\nls\n```",
        "extra": {"response": {"usage": usage, "model": "m", "created": created}},
    }
    return json.dumps({"messages": [{"role": "user", "content": "go"}, reply]})


def _claude_code(usage: dict[str, Any]) -> str:
    lines = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    first = next(line for line in lines if line["type"] == "assistant")
    first["message"]["usage"] = usage
    return json.dumps(first) + "\n"


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("a.traj", _swe_agent({"tokens_sent": HUGE, "tokens_received": 5}), "tokens_sent"),
        ("a.traj", _swe_agent({"tokens_received": HUGE}), "tokens_received"),
        ("a.traj", _swe_agent({"tokens_sent": 5, "instance_cost": HUGE}), "instance_cost"),
        ("a.traj", _swe_agent({"tokens_sent": 5, "instance_cost": 1e400}), "instance_cost"),
        ("a.traj.json", _mini({"prompt_tokens": HUGE}), "message 1: prompt_tokens"),
        ("a.traj.json", _mini({"prompt_tokens": 3, "cost": HUGE}), "message 1: cost"),
        ("a.traj.json", _mini({"prompt_tokens": 3}, created=HUGE), "message 1: created"),
        ("s.jsonl", _claude_code({"input_tokens": HUGE}), "line 1: input_tokens"),
        ("s.jsonl", _claude_code({"output_tokens": 1, "cache_read_input_tokens": HUGE}), "line 1"),
    ],
    ids=[
        "swe-agent tokens_sent",
        "swe-agent tokens_received",
        "swe-agent cost",
        "swe-agent infinite cost",
        "mini-swe-agent prompt_tokens",
        "mini-swe-agent cost",
        "mini-swe-agent created",
        "claude code input_tokens",
        "claude code cache reads",
    ],
)
def test_a_count_or_cost_past_any_bound_is_one_clear_error(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    error = _replay_error(path)
    assert where in error
    assert "out of range" in error
    assert len(error) < 400  # the number itself is never repeated


def test_counts_within_the_bound_are_read(tmp_path: Path) -> None:
    path = tmp_path / "a.traj"
    path.write_text(_swe_agent({"tokens_sent": 10**15, "tokens_received": 7}))
    result = run("replay", "--all", str(path))
    assert result.returncode == 0, result.stderr
    assert "1000000000000007 tokens in model calls" in result.stdout


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("s.jsonl", '{"a": ' * 200_000 + "1" + "}" * 200_000 + "\n"),
        ("s.jsonl", '{"type": ' * 200_000 + "1" + "}" * 200_000 + "\n"),
        ("run.json", '{"a": ' * 200_000 + "1" + "}" * 200_000),
    ],
    ids=["jsonl object", "jsonl type", "json"],
)
def test_a_first_line_nested_past_the_parser_is_one_clear_error(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert "nested too deeply" in _replay_error(path)


def test_a_transcript_line_nested_near_the_parsers_limit_is_read_or_refused(
    tmp_path: Path,
) -> None:
    """Whether a line nested as deep as the parser goes parses depends on the stack it is
    parsed on: it is a call, or one clear error, never a traceback."""
    lines = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    first = next(line for line in lines if line["type"] == "assistant")
    first["message"]["content"][-1]["input"] = "NESTED"
    for depth in (900, 960, 990, 1_000, 1_100):
        path = tmp_path / f"deep{depth}.jsonl"
        path.write_text(json.dumps(first).replace('"NESTED"', "[" * depth + "]" * depth) + "\n")
        result = run("replay", "--all", str(path))
        assert "Traceback" not in result.stderr
        assert result.returncode in (0, 2), result.stderr
        if result.returncode == 2:
            assert "nested too deeply" in result.stderr


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _replay_cpu(path: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """``replay PATH`` as a subprocess, and the CPU seconds it took."""
    before = _children_cpu()
    result = subprocess.run(
        [sys.executable, "-m", "otel_loopguard.cli.main", "replay", "--all", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return _children_cpu() - before, result


def _reply(content: str) -> str:
    return json.dumps(
        {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": content}]}
    )


@pytest.mark.parametrize(
    "hostile",
    [
        "```bash" + "\n" * (256 << 10),
        "```bash" + "\n" * (128 << 10) + "x" * (128 << 10),
        "```bash\nx" * (32 << 10),
    ],
    ids=["newlines", "newlines then text", "opened blocks"],
)
def test_a_reply_that_opens_a_block_it_never_closes_is_read_in_linear_time(
    tmp_path: Path, hostile: str
) -> None:
    """mini-swe-agent's action pattern, matched by backtracking, takes time quadratic in such a
    reply (62 KiB of newlines: 10 to 30 s; 2 MiB: hours); read as the same size of ordinary
    text, within a small factor of its time."""
    ordinary = tmp_path / "ordinary.traj.json"
    ordinary.write_text(_reply("```bash\nls\n```\n" + "word " * (len(hostile) // 5)))
    slow = tmp_path / "hostile.traj.json"
    slow.write_text(_reply(hostile))
    baseline, _ = _replay_cpu(ordinary)
    took, result = _replay_cpu(slow)
    assert result.returncode == 0, result.stderr
    assert took < 5 * baseline, (took, baseline)


_PIECES = ("```bash", "```", "`", "\n", " ", "\t", "x")


@pytest.mark.parametrize("length", range(1, 7))
def test_the_actions_read_are_mini_swe_agents_own_regex(length: int) -> None:
    """Every text of up to six pieces: the blocks mini-swe-agent's ``action_regex`` finds."""
    own = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
    for pieces in itertools.product(_PIECES, repeat=length):
        text = "".join(pieces)
        assert mini_swe_agent_actions(text) == own.findall(text), repr(text)


def test_a_hostile_model_name_in_a_prices_file_is_shown_escaped(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    name = "\x1b[2J\x1b]0;pwned\x07m\u202e"
    prices.write_text(json.dumps({"prices": {name: {"input": "x"}}}))
    result = run("replay", "--prices", str(prices), str(CLAUDE))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr
    assert "\x07" not in result.stderr
    assert "\u202e" not in result.stderr
    assert "\\x1b[2J\\x1b]0;pwned\\x07m\\u202e" in result.stderr
